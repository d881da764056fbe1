"""``serve --parallel 2``: two clients of one llama.cpp model stream at the same time, each
getting the reply it gets alone, and ``/v1/status`` shows both slots busy; a third waits.
``--parallel``'s default is chosen by memory (docs/server-api.md#several-clients)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from app.engine.chat.memory import MemoryEstimate
from app.engine.server.models.loading import sequences_by_memory
from tests.server.server_process import running_server

pytestmark = pytest.mark.slow

STORIES = ("Write a long story about a dragon.", "Write a long story about the sea.")


def _reply(base_url: str, prompt: str, tokens: int) -> str:
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "temperature": 0,
        "mtp_depth": 2,
    }
    answer = httpx.post(f"{base_url}/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["message"]["content"]


def test_two_clients_stream_at_once_and_each_gets_its_own_reply(tmp_path: Path) -> None:
    with running_server("--parallel", "2", "--threads", "1", home=tmp_path) as server:
        alone = [_reply(server.base_url, story, 48) for story in STORIES]
        replies: list[str | None] = [None, None]
        seen: dict[str, object] = {}

        def ask(index: int) -> None:
            replies[index] = _reply(server.base_url, STORIES[index], 48)

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
