"""llama.cpp's own MTP loop (``llama-server --spec-type draft-mtp``) beside ours, in one run.

A claim that this project's loop is faster than llama.cpp's is only worth what the comparison
is: same model, same prompts, same sampling, same thread count, same machine at the same moment.
So ``bench decode --vs-llama-server PATH`` starts one llama-server per configuration — plain
decoding, and ``--spec-type draft-mtp --spec-draft-n-max K`` for each depth — all at once on
local ports (an idle server only waits), and the benchmark sends every prompt to each of them
right after running it through its own modes. A model that drafts with a separate drafter model
(Gemma 4's assistant) gets it as ``--model-draft D`` beside ``--spec-type draft-mtp``: the same
pair as ours. The figures come from each reply's ``timings``:
``predicted_n`` / ``predicted_ms`` (decode only, like ours) and, with drafting,
``draft_n`` / ``draft_n_accepted``.

The servers use llama.cpp's defaults for everything not named here (``--spec-draft-n-min 0``,
``--spec-draft-p-min 0``), and requests go through its OpenAI-compatible chat endpoint, so the
model's own chat template formats the prompt as ours does.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.remote.client import wire_content
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.sampling.sampler import SamplerSettings

START_TIMEOUT_SECONDS = 120.0
REQUEST_TIMEOUT_SECONDS = 300.0
_LOG_TAIL_CHARS = 2000


@dataclass(frozen=True)
class ServerReply:
    """What one reply's ``timings`` say: decoded tokens, their time and the drafts."""

    tokens: int
    decode_seconds: float
    drafted: int
    accepted: int


def _timings_of(response: dict[str, Any]) -> dict[str, Any]:
    """A llama-server reply's ``timings`` object, or a clear error when it has none."""
    timings = response.get("timings")
    if not isinstance(timings, dict):
        raise RuntimeBackendError(
            "llama-server's reply has no 'timings' object; use a llama-server built from the "
            "llama.cpp that llama-cpp-python vendors (packaging/build_llama_server.sh)"
        )
    return timings


def parse_timings(response: dict[str, Any]) -> ServerReply:
    """The figures of a llama-server reply; a clear error naming the field if one is missing."""
    timings = _timings_of(response)
    try:
        tokens = int(timings["predicted_n"])
        milliseconds = float(timings["predicted_ms"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RuntimeBackendError(
            f"llama-server's 'timings' lack a numeric {exc} (got keys {sorted(timings)})"
        ) from None
    return ServerReply(
        tokens=tokens,
        decode_seconds=milliseconds / 1000.0,
        drafted=int(timings.get("draft_n", 0)),
        accepted=int(timings.get("draft_n_accepted", 0)),
    )


@dataclass(frozen=True)
class PromptTimings:
    """How llama-server took in one reply's prompt: ``cache_n`` tokens from its prompt cache,
    ``prompt_n`` computed in ``prompt_ms``; ``first_token_seconds``: from sending the request
    to the first streamed event, as a client sees it (0 when not streamed)."""

    cached_tokens: int
    computed_tokens: int
    prompt_seconds: float
    first_token_seconds: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return self.cached_tokens + self.computed_tokens


def parse_prompt_timings(response: dict[str, Any]) -> PromptTimings:
    """The prompt figures of a llama-server reply; a clear error naming a missing field."""
    timings = _timings_of(response)
    try:
        return PromptTimings(
            cached_tokens=int(timings["cache_n"]),
            computed_tokens=int(timings["prompt_n"]),
            prompt_seconds=float(timings["prompt_ms"]) / 1000.0,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RuntimeBackendError(
            f"llama-server's 'timings' lack a numeric {exc} (got keys {sorted(timings)}); "
            "'cache_n' needs a llama-server from 2025 or later"
        ) from None


@dataclass(frozen=True)
class ServerFigures:
    """One llama-server configuration's replies, pooled."""

    label: str
    depth: int
    requests: int
    generated_tokens: int
    decode_seconds: float
    drafted: int
    accepted: int
    p_min: float = 0.0
    """llama-server's ``--spec-draft-p-min`` (0: drafts every token up to the depth)."""

    @property
    def decode_tokens_per_second(self) -> float:
        return self.generated_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    @property
    def acceptance(self) -> float:
        """Share of drafted tokens that were kept (llama.cpp's definition: all depths pooled)."""
        return self.accepted / self.drafted if self.drafted else 0.0


class LlamaServer:
    """One llama-server process on a free local port, serving one model and configuration."""

    def __init__(
        self,
        binary: Path,
        model: Path,
        *,
        depth: int,
        threads: int,
        batch_threads: int = 0,
        context: int = 0,
        p_min: float = 0.0,
        projector: Path | None = None,
        parallel: int = 1,
        drafter: Path | None = None,
    ) -> None:
        """``threads`` for a step and ``batch_threads`` for a prompt's batches (0: the same), as
        ours run; ``context`` 0: llama-server's default context (the model's trained one);
        ``p_min`` > 0: drafting stops at a token whose draft probability is below it;
        ``projector``: a vision projector (``--mmproj``) for requests with images; ``parallel``:
        its slots (``-np``: sequences decoded together, each with its own share of ``context``);
        ``drafter``: the separate drafter model drafting runs with."""
        self.depth = depth
        self.p_min = p_min
        self.label = "llama-server plain" if depth == 0 else f"llama-server MTP K={depth}"
        if p_min:
            self.label += f", p-min {p_min:g}"
        if parallel > 1:
            self.label = self.label.replace("llama-server", f"llama-server -np {parallel}")
        self._replies: list[ServerReply] = []
        self._port = _free_port()
        command = [
            str(binary),
            "-m", str(model),
            "--host", "127.0.0.1",
            "--port", str(self._port),
            "-t", str(threads),
            "-tb", str(batch_threads or threads),
            "-np", str(parallel),
            "--no-webui",
        ]  # fmt: skip
        if context:
            command += ["-c", str(context)]
        if depth:
            command += ["--spec-type", "draft-mtp", "--spec-draft-n-max", str(depth)]
            if drafter is not None:
                command += ["--model-draft", str(drafter)]
        if p_min:
            command += ["--spec-draft-p-min", str(p_min)]
        if projector is not None:
            command += ["--mmproj", str(projector)]
        # llama-server logs a lot: into a file, since an unread pipe would fill and stall it.
        self._log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed in close())
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeBackendError(
                    f"{self.label} exited with code {self._process.returncode} while starting: "
                    f"{self._log_tail()}"
                )
            try:
                with urllib.request.urlopen(self._url("/health"), timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeBackendError(
            f"{self.label} did not answer /health within {START_TIMEOUT_SECONDS:.0f} s"
        )

    def reply(
        self,
        prompt: str | Sequence[ChatMessage],
        sampler: SamplerSettings,
        max_tokens: int,
        *,
        record: bool = True,
    ) -> ServerReply:
        """The figures of a whole reply to ``prompt`` (one user message's text, or a
        conversation whose images go as ``image_url`` parts)."""
        if isinstance(prompt, str):
            prompt = [ChatMessage("user", prompt)]
        history = [{"role": m.role, "content": wire_content(m)} for m in prompt]
        body = _chat_body(history, sampler, max_tokens)
        try:
            with self._post(body) as response:
                answer = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RuntimeBackendError(f"{self.label} failed a request: {exc}") from None
        reply = parse_timings(answer if isinstance(answer, dict) else {})
        if record:
            self._replies.append(reply)
        return reply

    def prompt_timings(
        self, messages: Sequence[ChatMessage], sampler: SamplerSettings, max_tokens: int
    ) -> PromptTimings:
        """Stream the reply to a whole conversation, prompt cache on: how its prompt was taken
        in (the ``timings`` of the last event) and when the first event came."""
        history = [{"role": m.role, "content": wire_content(m)} for m in messages]
        body = {**_chat_body(history, sampler, max_tokens), "stream": True}
        first_event, timings = 0.0, None
        started = time.perf_counter()
        try:
            with self._post(body) as response:
                for line in response:
                    text = line.decode("utf-8", errors="replace").strip()
                    if not text.startswith("data:") or text == "data: [DONE]":
                        continue
                    event = json.loads(text.removeprefix("data:"))
                    if not isinstance(event, dict):
                        continue
                    if not first_event and event.get("choices"):
                        first_event = time.perf_counter() - started
                    if "timings" in event:
                        timings = event
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RuntimeBackendError(f"{self.label} failed a request: {exc}") from None
        figures = parse_prompt_timings(timings or {})
        return dataclasses.replace(figures, first_token_seconds=first_event)

    def _post(self, body: dict[str, Any]) -> Any:
        """The open HTTP response to ``body`` on the chat endpoint (use it in ``with``)."""
        request = urllib.request.Request(
            self._url("/v1/chat/completions"),
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        return urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS)

    def figures(self) -> ServerFigures:
        return ServerFigures(
            label=self.label,
            depth=self.depth,
            requests=len(self._replies),
            generated_tokens=sum(r.tokens for r in self._replies),
            decode_seconds=sum(r.decode_seconds for r in self._replies),
            drafted=sum(r.drafted for r in self._replies),
            accepted=sum(r.accepted for r in self._replies),
            p_min=self.p_min,
        )

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``…/v1``)."""
        return self._url("/v1")

    def _url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._port}{path}"

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-_LOG_TAIL_CHARS:].strip() or "(no output)"


PUBLISHED_P_MIN = 0.75
"""The ``--spec-draft-p-min`` a published Qwen3.6-27B card recommends for dense models."""


class LlamaServerPool:
    """llama-server plain, at each depth, and at the deepest with :data:`PUBLISHED_P_MIN`,
    started together and stopped together."""

    def __init__(
        self,
        binary: Path,
        model: Path,
        *,
        depths: Sequence[int],
        threads: int,
        batch_threads: int = 0,
        drafter: Path | None = None,
    ) -> None:
        if not binary.is_file():
            raise RuntimeBackendError(
                f"--vs-llama-server {binary}: no such file; build it with "
                "`bash packaging/build_llama_server.sh`, which prints its path"
            )
        self.servers: list[LlamaServer] = []
        try:
            for depth in (0, *depths):
                self.servers.append(
                    LlamaServer(
                        binary,
                        model,
                        depth=depth,
                        threads=threads,
                        batch_threads=batch_threads,
                        drafter=drafter,
                    )
                )
            self.servers.append(
                LlamaServer(
                    binary,
                    model,
                    depth=max(depths),
                    threads=threads,
                    batch_threads=batch_threads,
                    p_min=PUBLISHED_P_MIN,
                    drafter=drafter,
                )
            )
            for server in self.servers:
                server.wait_ready()
        except BaseException:
            self.close()
            raise

    def warm_up(self, prompt: str, sampler: SamplerSettings, max_tokens: int) -> None:
        for server in self.servers:
            server.reply(prompt, sampler, max_tokens, record=False)

    def run(self, prompt: str, sampler: SamplerSettings, max_tokens: int) -> None:
        for server in self.servers:
            server.reply(prompt, sampler, max_tokens)

    def figures(self) -> tuple[ServerFigures, ...]:
        return tuple(server.figures() for server in self.servers)

    def close(self) -> None:
        for server in self.servers:
            server.close()


def _chat_body(
    messages: list[dict[str, Any]], sampler: SamplerSettings, max_tokens: int
) -> dict[str, Any]:
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": sampler.temperature,
        "top_k": sampler.top_k,
        "top_p": sampler.top_p,
        "min_p": sampler.min_p,
        "seed": sampler.seed if sampler.seed is not None else -1,
        "cache_prompt": True,
        "stream": False,
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
