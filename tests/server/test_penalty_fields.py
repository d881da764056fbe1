"""Penalties and ``logit_bias`` through the real ``openai`` client against ``serve`` (the demo
model): each field changes the reply, a banned token is never written, MTP replies with them
are plain decoding's, and a token id the model lacks is a 400 naming the field."""

from __future__ import annotations

import re

import openai
import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.backend import LoadSettings
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
    penalties = (
        ({"presence_penalty": 1.5}, {}),
        ({"frequency_penalty": 1.5}, {}),
        ({}, {"repetition_penalty": 1.5}),  # llama.cpp's and vLLM's fields, sent as extra_body
        ({}, {"repeat_penalty": 1.5}),
    )
    for fields, extra in penalties:
        penalised = _say(server, **fields, extra_body={**extra, "mtp_depth": 0})
        assert penalised != plain, (fields, extra)
        speculative = _say(server, **fields, extra_body={**extra, "mtp_depth": 3})
        assert speculative == penalised, (fields, extra)


def test_banned_tokens_are_never_written(server: ServerProcess) -> None:
    """The reply's most frequent word is banned — every token that holds it: the word is gone
    from the reply, plain and with MTP."""
    plain = _say(server)
    words = re.findall(r"[A-Za-z_]{3,}", plain)
    word = max(words, key=words.count)
    assert words.count(word) >= 2, plain
    backend = LlamaCppBackend(demo_model_path(), LoadSettings(threads=1, context_length=256))
    try:
        size = backend.info.vocab_size
        holding = [token for token in range(size) if word.encode() in backend.token_bytes(token)]
    finally:
        backend.close()
    bias = {str(token): -100 for token in holding}
    for depth in (0, 3):
        reply = _say(server, logit_bias=bias, extra_body={"mtp_depth": depth})
        assert word not in reply and len(reply) > 40, (word, reply)


def test_a_token_id_the_model_lacks_is_a_400_naming_logit_bias(server: ServerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _say(server, logit_bias={"999999": 5})
    assert "logit_bias" in caught.value.message and "vocabulary" in caught.value.message
