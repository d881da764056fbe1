"""Penalties and ``logit_bias`` through the real ``openai`` client against ``serve`` (the demo
model): each field changes the reply, a banned token is never written, MTP replies with them
are plain decoding's, and a token id the model lacks is a 400 naming the field."""

from __future__ import annotations

import openai
import pytest

from app.engine.runtime.backends.llama_cpp.vocabulary_only import VocabularyOnly
from app.engine.runtime.core.demo_model import demo_model_path
from tests.server.server_process import ServerProcess
from tests.server.test_openai_conformance import SERVED, STORY, client_for

pytestmark = pytest.mark.slow


def _say(server: ServerProcess, **fields: object) -> str:
    reply = client_for(server).chat.completions.create(
        model=SERVED, messages=STORY, max_tokens=48, temperature=0, **fields
    )
    return reply.choices[0].message.content or ""


def test_each_penalty_changes_the_reply_and_mtp_gives_plain_decodings(
    server: ServerProcess,
) -> None:
    plain = _say(server)
    penalties = {
        "presence_penalty": {"presence_penalty": 1.5},
        "frequency_penalty": {"frequency_penalty": 1.5},
        "repetition_penalty": {"extra_body": {"repetition_penalty": 1.5}},
        "repeat_penalty": {"extra_body": {"repeat_penalty": 1.5}},
    }
    for name, fields in penalties.items():
        penalised = _say(
            server, **fields, extra_body={**fields.get("extra_body", {}), "mtp_depth": 0}
        )
        assert penalised != plain, name
        assert (
            _say(server, **fields, extra_body={**fields.get("extra_body", {}), "mtp_depth": 3})
            == penalised
        ), name


def test_a_banned_token_is_never_written(server: ServerProcess) -> None:
    """The reply's most frequent word that is one token is banned: it is gone from the reply,
    plain and with MTP."""
    plain = _say(server)
    words = plain.split()
    vocabulary = VocabularyOnly(demo_model_path())
    try:
        pieces = {word: vocabulary.tokenize(f" {word}", parse_special=False) for word in words}
    finally:
        vocabulary.close()
    word = max((word for word in words if len(pieces[word]) == 1), key=words.count)
    assert words.count(word) >= 2, plain
    for depth in (0, 3):
        reply = _say(
            server, logit_bias={str(pieces[word][0]): -100}, extra_body={"mtp_depth": depth}
        )
        assert f" {word}" not in reply, reply


def test_a_token_id_the_model_lacks_is_a_400_naming_logit_bias(server: ServerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _say(server, logit_bias={"999999": 5})
    assert "logit_bias" in caught.value.message and "vocabulary" in caught.value.message
