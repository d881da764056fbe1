"""N clients at once against an OpenAI-compatible server: what each of them waits and gets.

``bench serve`` sends the same load to ``mtp-studio serve`` and to llama-server: N streamed chat
requests started together (a different story prompt each, greedy, ``max_tokens`` each), read to
the end in N threads. Per client: the time to its first text (TTFT, from sending), its tokens
(the usage the server reports in the stream's last chunk) and its decode speed (tokens over the
time from its first text to its end). Per round: the aggregate speed (all clients' tokens over
the time from the first send to the last end). docs/benchmarks.md#bench-serve.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from app.engine.errors import RemoteError

STORY_SUBJECTS = (
    "a dragon and a knight",
    "a lighthouse keeper",
    "a robot learning to paint",
    "two rival chefs",
    "a city under the sea",
    "a clockmaker's apprentice",
    "a lost spaceship",
    "a village of talking cats",
)
REQUEST_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class ClientRun:
    """One client's request: ``ttft_seconds`` from sending to its first text, ``seconds`` from
    sending to the end, ``tokens`` generated."""

    ttft_seconds: float
    seconds: float
    tokens: int

    @property
    def tokens_per_second(self) -> float:
        decoding = self.seconds - self.ttft_seconds
        return self.tokens / decoding if decoding > 0 else 0.0


@dataclass(frozen=True)
class LoadRound:
    """N clients started together."""

    runs: tuple[ClientRun, ...]
    wall_seconds: float

    @property
    def clients(self) -> int:
        return len(self.runs)

    @property
    def aggregate_tokens_per_second(self) -> float:
        tokens = sum(run.tokens for run in self.runs)
        return tokens / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def client_tokens_per_second(self) -> float:
        """The mean of each client's own decode speed."""
        return statistics.mean(run.tokens_per_second for run in self.runs)

    @property
    def mean_ttft_seconds(self) -> float:
        return statistics.mean(run.ttft_seconds for run in self.runs)

    @property
    def max_ttft_seconds(self) -> float:
        return max(run.ttft_seconds for run in self.runs)


def story_prompt(index: int) -> str:
    return f"Write a long story about {STORY_SUBJECTS[index % len(STORY_SUBJECTS)]}."


def run_clients(
    base_url: str,
    model: str,
    clients: int,
    max_tokens: int,
    extra: dict[str, Any] | None = None,
) -> LoadRound:
    """``clients`` streamed requests started together against ``base_url`` (``…/v1``)."""
    runs: list[ClientRun | BaseException] = [RemoteError("not run")] * clients
    start = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": story_prompt(index)}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            **(extra or {}),
        }
        start.wait()
        try:
            runs[index] = _streamed(f"{base_url}/chat/completions", body)
        except BaseException as exc:  # reported after the round, naming the client
            runs[index] = exc

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    for index, run in enumerate(runs):
        if not isinstance(run, ClientRun):
            raise RemoteError(f"client {index + 1} of {clients} at {base_url} failed: {run}")
    return LoadRound(tuple(run for run in runs if isinstance(run, ClientRun)), wall)


def _streamed(url: str, body: dict[str, Any]) -> ClientRun:
    sent = time.perf_counter()
    first: float | None = None
    tokens = 0
    with httpx2.stream("POST", url, json=body, timeout=REQUEST_TIMEOUT_SECONDS) as response:
        if response.status_code != 200:
            raise RemoteError(f"{url} answered {response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line.removeprefix("data: "))
            if first is None and _has_text(event):
                first = time.perf_counter() - sent
            usage = event.get("usage")
            if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                tokens = int(usage["completion_tokens"])
    ended = time.perf_counter() - sent
    return ClientRun(
        ttft_seconds=first if first is not None else ended, seconds=ended, tokens=tokens
    )


def _has_text(event: dict[str, Any]) -> bool:
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    delta = choices[0].get("delta") if isinstance(choices[0], dict) else None
    return isinstance(delta, dict) and bool(delta.get("content"))


def median_round(rounds: Sequence[LoadRound]) -> LoadRound:
    """The round whose aggregate speed is the median of ``rounds``."""
    ordered = sorted(rounds, key=lambda r: r.aggregate_tokens_per_second)
    return ordered[len(ordered) // 2]
