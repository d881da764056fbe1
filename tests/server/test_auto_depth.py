"""``serve`` decodes with the auto MTP depth unless told otherwise, exactly, and says so.

A new user's ``mtp-studio serve`` (no flags, fresh app folders) announces auto, replies with
``"depth": "auto"`` in the ``mtp`` object, gives at temperature 0 the very tokens plain decoding
gives, and keeps what the depth learnt in the app's data folder; a request may pick ``"auto"``
or a fixed depth, /metrics counts cycles and drafts by depth setting, and a bad ``mtp_depth``
(in a request or on the command line) is refused naming it and the allowed values.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest
from openai import OpenAI

from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.speculative.depth_memory import STORE_FILE_NAME, model_identity
from app.engine.runtime.speculative.depth_policy import AUTO_MAX_DEPTH
from tests.server.server_process import ServerProcess, running_server

pytestmark = pytest.mark.slow

MODEL = "demo-mtp"
PROMPT = [{"role": "user", "content": "Write a long story about a dragon."}]
REPLY_TOKENS = 64


@pytest.fixture(scope="module")
def new_user_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("new-user-home")


@pytest.fixture(scope="module")
def new_user_server(new_user_home: Path) -> Iterator[ServerProcess]:
    with running_server(home=new_user_home) as process:
        yield process


def client_for(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def ask(server: ServerProcess, **extra: object) -> openai.types.chat.ChatCompletion:
    return client_for(server).chat.completions.create(
        model=MODEL,
        messages=PROMPT,
        max_tokens=REPLY_TOKENS,
        temperature=0,
        extra_body=extra or None,
    )


def metric(server: ServerProcess, name: str, labels: str) -> float:
    text = httpx2.get(f"{server.root_url}/metrics").text
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_a_new_users_server_decodes_with_auto_depth_exactly(
    new_user_server: ServerProcess, new_user_home: Path
) -> None:
    assert "MTP depth auto" in new_user_server.wait_for_line("listening on")
    card = client_for(new_user_server).models.list().data[0]
    assert card.model_extra["mtp"]["depth"] == "auto"

    auto = ask(new_user_server)
    mtp = auto.model_extra["mtp"]
    assert mtp["depth"] == "auto" and mtp["adaptive"] is True
    assert mtp["max_depth"] == AUTO_MAX_DEPTH == len(mtp["drafted_by_depth"])
    # a fresh machine starts with trial cycles at depths 1, 2 and 0: it drafted, but not always
    assert mtp["drafted_by_depth"][0] > 0 and mtp["cycles"] > mtp["drafted_by_depth"][0]
    assert 0 < mtp["mean_draft_depth"] < AUTO_MAX_DEPTH

    plain = ask(new_user_server, mtp_depth=0)
    assert plain.model_extra["mtp"]["depth"] == 0 and plain.model_extra["mtp"]["cycles"] == 0
    assert auto.usage.completion_tokens == plain.usage.completion_tokens == REPLY_TOKENS
    assert auto.choices[0].message.content == plain.choices[0].message.content

    # what the depth learnt is kept for the next start, per model file and machine
    saved = json.loads((new_user_home / "data" / STORE_FILE_NAME).read_text())
    identity = model_identity(demo_model_path())
    learnt = [state for key, state in saved["policies"].items() if key.startswith(identity)]
    assert len(learnt) == 1 and learnt[0]["trials"][1] > 0 and learnt[0]["timed"]


def test_a_request_picks_auto_or_a_fixed_depth(server: ServerProcess) -> None:
    cycles_before = metric(server, "mtp_studio_cycles_total", 'depth_setting="3"')
    drafts_before = metric(server, "mtp_studio_cycle_draft_tokens_total", 'depth_setting="3"')
    replies = {depth: ask(server, mtp_depth=depth) for depth in ("auto", 0, 3)}
    stats = {depth: reply.model_extra["mtp"] for depth, reply in replies.items()}
    assert [stats[depth]["depth"] for depth in replies] == ["auto", 0, 3]
    assert len(stats["auto"]["drafted_by_depth"]) == AUTO_MAX_DEPTH
    assert stats[0]["drafted_by_depth"] == []
    assert stats[3]["drafted_by_depth"][0] >= stats[3]["cycles"] - 1 > 0
    assert stats[3]["mean_draft_depth"] > 2  # only the reply's last cycles may draft fewer
    texts = {reply.choices[0].message.content for reply in replies.values()}
    assert len(texts) == 1, "greedy output must not depend on the depth"

    cycles = metric(server, "mtp_studio_cycles_total", 'depth_setting="3"') - cycles_before
    drafts = metric(server, "mtp_studio_cycle_draft_tokens_total", 'depth_setting="3"')
    assert cycles == stats[3]["cycles"]
    assert drafts - drafts_before == sum(stats[3]["drafted_by_depth"])
    assert metric(server, "mtp_studio_cycles_total", 'depth_setting="auto"') > 0


def test_a_streamed_reply_ends_with_the_auto_depth_statistics(server: ServerProcess) -> None:
    chunks = list(
        client_for(server).chat.completions.create(
            model=MODEL, messages=PROMPT, max_tokens=23, temperature=0, stream=True
        )
    )
    mtp = chunks[-1].model_extra["mtp"]
    assert mtp["depth"] == "auto" and mtp["generated_tokens"] == 23
    line = server.wait_for_line(r"POST /v1/chat/completions 200 .*\+23 tokens.*depth auto")
    assert "drafts/cycle" in line


@pytest.mark.parametrize("value", ["deep", "AUTO", 9, -1, 2.5, True])
def test_a_bad_mtp_depth_is_a_400_naming_the_field_and_the_values(
    server: ServerProcess, value: object
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(server, mtp_depth=value)
    error = caught.value.body
    assert caught.value.status_code == 400 and error["param"] == "mtp_depth"
    assert '"auto" or a whole number 0' in error["message"]
    assert f"got {json.dumps(value)}" in error["message"]


def test_a_depth_deeper_than_the_loaded_one_says_how_to_allow_it(server: ServerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(server, mtp_depth=6)
    assert "loaded the model for depths up to 4" in caught.value.message
    assert "--mtp-depth 6" in caught.value.message


@pytest.mark.parametrize(
    ("value", "complaint"),
    [("9", "--mtp-depth 9 is invalid"), ("deep", "'deep' is not a depth")],
)
def test_a_bad_command_line_depth_is_refused_before_loading(value: str, complaint: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--port", "0", "--mtp-depth", value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert complaint in result.stderr and "auto" in result.stderr
