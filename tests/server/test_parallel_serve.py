"""``serve --parallel 2``: two clients of one llama.cpp model stream at the same time, each
getting the reply it gets alone, ``/v1/status`` shows both slots busy, and a client's next turn
reuses its conversation.
``--parallel``'s default is chosen by memory, and N windows that would not fit where one was
chosen to fit get a smaller context (docs/server-api.md#several-clients)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from app.engine.chat.context_choice import FIT_SHARE, LoadPlan
from app.engine.chat.memory import MemoryEstimate
from app.engine.chat.model_files import describe_model
from app.engine.load_options import LoadOptions
from app.engine.server.models.catalogue import ServableModel
from app.engine.server.models.loading import LoadRules, RunnerFactory, sequences_by_memory
from tests.runtime.tiny_model import TinyModelShape, write_tiny_qwen35
from tests.server.long_reply import LONG
from tests.server.server_process import running_server

STORIES = ("Write a long story about a dragon.", "Write a long story about the sea.")
TOKENS = 200


def _reply(base_url: str, prompt: str, tokens: int) -> str:
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "temperature": 0,
        "mtp_depth": 2,
        "response_format": LONG,  # runs to max_tokens: both are seen running together
    }
    answer = httpx.post(f"{base_url}/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["message"]["content"]


@pytest.mark.slow
def test_two_clients_stream_at_once_and_each_gets_its_own_reply(tmp_path: Path) -> None:
    with running_server("--parallel", "2", "--threads", "1", home=tmp_path) as server:
        assert "· 2 requests at once" in server.wait_for_line("loaded demo-mtp in")
        alone = [_reply(server.base_url, story, TOKENS) for story in STORIES]
        replies: list[str | None] = [None, None]
        seen: dict[str, object] = {}

        def ask(index: int) -> None:
            replies[index] = _reply(server.base_url, STORIES[index], TOKENS)

        def watch() -> None:  # both requests run together while they last
            for _ in range(400):
                status = httpx.get(f"{server.base_url}/status").json()
                slots = status["loaded"][0]["slots"]
                if slots["busy"] == 2:
                    seen["slots"] = slots
                    return

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        watcher = threading.Thread(target=watch)
        watcher.start()
        for thread in threads:
            thread.start()
        for thread in (*threads, watcher):
            thread.join(timeout=120)
        assert replies == alone
        assert seen.get("slots") == {"total": 2, "busy": 2}
        # A client's next turn finds its conversation in the sequence that kept it.
        follow_up = {
            "messages": [
                {"role": "user", "content": STORIES[0]},
                {"role": "assistant", "content": alone[0]},
                {"role": "user", "content": "Go on."},
            ],
            "max_tokens": 4,
        }
        answer = httpx.post(f"{server.base_url}/chat/completions", json=follow_up, timeout=120)
        usage = answer.json()["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] > usage["prompt_tokens"] // 2


def test_the_default_is_as_many_sequences_as_half_the_memory_holds_at_least_two() -> None:
    gib = 2**30
    small = MemoryEstimate(
        weights_bytes=gib, kv_bytes=gib // 4, recurrent_bytes=0, compute_bytes=0, context=4096
    )
    large = MemoryEstimate(
        weights_bytes=10 * gib, kv_bytes=4 * gib, recurrent_bytes=0, compute_bytes=0, context=4096
    )
    assert sequences_by_memory(small, 16 * gib) == 4
    assert sequences_by_memory(large, 32 * gib) == 2  # 10 + 3 × 4 > 16: the least, 2
    assert sequences_by_memory(large, 48 * gib) == 3  # 10 + 3 × 4 ≤ 24
    assert sequences_by_memory(None, 48 * gib) == 2


def test_n_windows_that_would_not_fit_get_a_smaller_context(tmp_path: Path) -> None:
    """With --ctx 0, four sequences of a 262k-token model on a small machine each get half the
    window one client gets, so the four fit where the one was chosen to fit."""
    path = write_tiny_qwen35(tmp_path / "long.gguf", shape=TinyModelShape(context_length=262144))
    description = describe_model(path)
    model = ServableModel(
        id="long",
        path=path,
        names=(),
        format="GGUF",
        quantisation="",
        size_bytes=description.size_bytes,
        mtp="head",
        mtp_detail="",
        mtp_note=None,
        description=description,
    )
    ram = 640 * 2**20

    def plan(parallel: int) -> LoadPlan:
        rules = LoadRules(LoadOptions(state_cache_mib=0), 4, memory_bytes=ram, parallel=parallel)
        return RunnerFactory(rules).plan(model)

    one, four = plan(1), plan(4)
    assert one.settings.context_length == 262144 and one.settings.sequences == 1
    assert four.settings.context_length == 131072 and four.settings.sequences == 4
    assert four.memory is not None and four.memory.total_bytes <= FIT_SHARE * ram
    assert four.choice.reason == "the largest that fits this machine 4 times"
