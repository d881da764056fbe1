"""Chat with a remote OpenAI-compatible server: list its models, stream a reply, stop it.

``POST {endpoint}/chat/completions`` with ``stream: true`` (server-sent events). The reply's text
arrives piece by piece; the last chunk carries ``usage`` and, depending on the server, MTP
Studio's ``mtp`` object or llama-server's ``timings``. For vLLM, whose replies carry neither,
/metrics is read before and after (when the server exposes speculative-decoding counters).
:meth:`RemoteStream.cancel` closes the connection, which makes these servers stop generating.
Whatever the server sends is checked by :mod:`.wire` before use: a malformed reply is a
:class:`RemoteError` naming what was wrong, never a traceback.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2

from app.engine.errors import RemoteError
from app.engine.remote.acceptance import (
    RemoteAcceptance,
    VllmCounters,
    from_llama_timings,
    from_mtp_extension,
)
from app.engine.remote.wire import body, count, lines, parse_json, rate, shown
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.sampling.sampler import SamplerSettings

CONNECT_SECONDS = 10.0
READ_SECONDS = 600.0  # a big model on a busy cluster may take minutes for the first token


@dataclass(frozen=True)
class RemoteReply:
    """A finished (or stopped) reply. ``acceptance`` None: the server does not report it.

    ``server_tokens_per_second``: the decode speed the server measured itself (MTP Studio's
    ``mtp`` object, llama-server's ``timings``), None when it reports none.
    """

    text: str
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds_to_first_token: float
    decode_seconds: float
    acceptance: RemoteAcceptance | None
    server_tokens_per_second: float | None = None

    @property
    def decode_tokens_per_second(self) -> float:
        """The server's own figure when it reports one (pieces may reach the client in bursts,
        which makes a client-side clock meaningless for a fast reply); else the completion
        tokens after the first over the time between the first and the last piece."""
        if self.server_tokens_per_second:
            return self.server_tokens_per_second
        if not self.completion_tokens or self.completion_tokens < 2 or self.decode_seconds <= 0:
            return 0.0
        return (self.completion_tokens - 1) / self.decode_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "ttft_seconds": self.seconds_to_first_token,
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "acceptance": self.acceptance.to_dict() if self.acceptance else None,
        }


class RemoteEndpoint:
    """One server: ``url`` is its OpenAI base URL (``http://host:port/v1``)."""

    def __init__(self, url: str, *, api_key: str | None = None, model: str | None = None) -> None:
        self.url = url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise RemoteError(
                f"endpoint {url!r} is not an http(s) URL: use e.g. http://host:8000/v1"
            )
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx2.Client(
            headers=headers, timeout=httpx2.Timeout(READ_SECONDS, connect=CONNECT_SECONDS)
        )
        self._model = model

    @property
    def root_url(self) -> str:
        """Where /metrics and /health live: the base URL without its trailing /v1."""
        return self.url.removesuffix("/v1")

    def models(self) -> list[str]:
        data = self._get_json(f"{self.url}/models")
        listed = data.get("data") if isinstance(data, dict) else None
        names = (
            [model.get("id") for model in listed or () if isinstance(model, dict)]
            if isinstance(listed, list)
            else None
        )
        if names is None or not all(isinstance(name, str) and name for name in names):
            raise RemoteError(f"{self.url}/models did not answer with a model list")
        return names

    def model(self) -> str:
        """The model to ask: the one given, else the server's only (or first) model."""
        if self._model is None:
            available = self.models()
            if not available:
                raise RemoteError(f"{self.url} serves no model; pass --remote-model NAME")
            self._model = available[0]
        return self._model

    def chat(
        self, messages: Sequence[ChatMessage], sampler: SamplerSettings, max_tokens: int
    ) -> RemoteStream:
        body: dict[str, Any] = {
            "model": self.model(),
            "messages": [{"role": m.role, "content": wire_content(m)} for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": max_tokens,
            "temperature": sampler.temperature,
            "top_p": sampler.top_p,
            "top_k": sampler.top_k,
            "min_p": sampler.min_p,
        }
        if sampler.seed is not None:
            body["seed"] = sampler.seed
        return RemoteStream(self, body, self._vllm_counters())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteEndpoint:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _vllm_counters(self) -> VllmCounters | None:
        """vLLM's counters now, or None (no /metrics, or no speculative decoding there)."""
        url = f"{self.root_url}/metrics"
        try:
            with self._http.stream("GET", url, timeout=CONNECT_SECONDS) as response:
                if response.status_code != 200:
                    return None
                text = body(response, url).decode("utf-8", "replace")
        except (httpx2.HTTPError, RemoteError):
            return None
        return VllmCounters.parse(text) if "vllm:" in text else None

    def _get_json(self, url: str) -> Any:
        try:
            with self._http.stream("GET", url, timeout=CONNECT_SECONDS) as response:
                raw = body(response, url)
        except httpx2.HTTPError as exc:
            raise RemoteError(
                f"cannot reach {url}: {exc}; check the URL and that it runs"
            ) from None
        _raise_for_status(response, url, raw)
        return parse_json(raw, url)


@dataclass
class _Progress:
    """What a stream has received so far (kept so an interrupted stream still has a reply)."""

    pieces: list[str] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)
    finish_reason: str = "stop"
    started_at: float = field(default_factory=time.monotonic)
    first_at: float = 0.0
    last_at: float = 0.0

    def add(self, text: str) -> None:
        self.last_at = time.monotonic()
        self.first_at = self.first_at or self.last_at
        self.pieces.append(text)

    @property
    def seconds_to_first_token(self) -> float:
        return self.first_at - self.started_at if self.first_at else 0.0


class RemoteStream:
    """Iterate for text pieces; then :attr:`reply`. :meth:`cancel` works from any thread."""

    def __init__(
        self, endpoint: RemoteEndpoint, body: dict[str, Any], vllm_before: VllmCounters | None
    ) -> None:
        self._endpoint = endpoint
        self._body = body
        self._vllm_before = vllm_before
        self._cancelled = threading.Event()
        self._response: httpx2.Response | None = None
        self._started = False
        self._progress = _Progress()
        self.reply: RemoteReply | None = None

    def cancel(self) -> None:
        self._cancelled.set()
        response = self._response
        if response is not None:
            response.close()

    def __iter__(self) -> Iterator[str]:
        if self._started:  # one request per stream: iterating again (wait) only finishes it
            return
        self._started = True
        url = f"{self._endpoint.url}/chat/completions"
        progress = self._progress
        try:
            with self._endpoint._http.stream("POST", url, json=self._body) as response:
                self._response = response
                if response.status_code != 200:
                    _raise_for_status(response, url, body(response, url))
                for data in _sse_data(response, url):
                    if self._cancelled.is_set():
                        break
                    if data.get("error"):
                        raise RemoteError(f"{url} failed mid-reply: {_error_message(data)}")
                    for text, reason in _choices(data, url):
                        if text:
                            progress.add(text)
                            yield text
                        progress.finish_reason = reason or progress.finish_reason
                    progress.last.update((k, v) for k, v in data.items() if k != "choices")
        except httpx2.HTTPError as exc:
            if not self._cancelled.is_set():
                raise RemoteError(f"the connection to {url} failed: {exc}") from None
        finally:
            self._response = None
        self.reply = self._finish()

    def wait(self) -> RemoteReply:
        """Read the rest of the reply; one interrupted (Ctrl-C) counts as cancelled."""
        for _piece in self:
            pass
        if self.reply is None:
            self._cancelled.set()
            self.reply = self._finish()
        return self.reply

    def _finish(self) -> RemoteReply:
        progress = self._progress
        usage = progress.last.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return RemoteReply(
            text="".join(progress.pieces),
            finish_reason="cancelled" if self._cancelled.is_set() else progress.finish_reason,
            prompt_tokens=count(usage.get("prompt_tokens")),
            completion_tokens=count(usage.get("completion_tokens")),
            seconds_to_first_token=progress.seconds_to_first_token,
            decode_seconds=progress.last_at - progress.first_at,
            acceptance=self._acceptance(progress.last),
            server_tokens_per_second=_server_speed(progress.last),
        )

    def _acceptance(self, last: dict[str, Any]) -> RemoteAcceptance | None:
        found = from_mtp_extension(last.get("mtp")) or from_llama_timings(last.get("timings"))
        if found is not None or self._vllm_before is None:
            return found
        after = self._endpoint._vllm_counters()
        return after.acceptance_since(self._vllm_before) if after is not None else None


def _server_speed(last: dict[str, Any]) -> float | None:
    """The decode tok/s in MTP Studio's ``mtp`` object or llama-server's ``timings``."""
    mtp, timings = last.get("mtp"), last.get("timings")
    if isinstance(mtp, dict) and (speed := rate(mtp.get("decode_tokens_per_second"))):
        return speed
    if isinstance(timings, dict) and (speed := rate(timings.get("predicted_per_second"))):
        return speed
    return None


def _sse_data(response: httpx2.Response, url: str) -> Iterator[dict[str, Any]]:
    for line in lines(response, url):
        if not line.startswith("data:"):
            continue
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return
        data = parse_json(payload, url)
        if isinstance(data, dict):
            yield data


def _choices(data: dict[str, Any], url: str) -> Iterator[tuple[str, str | None]]:
    """Each choice's text and finish reason; a chunk whose ``choices`` are not what OpenAI's are
    is a :class:`RemoteError` naming what was found."""
    choices = data.get("choices") or []
    if not isinstance(choices, list):
        raise RemoteError(f"{url} sent 'choices' {shown(choices)}, not a list of choices")
    for choice in choices:
        delta = choice.get("delta") or {} if isinstance(choice, dict) else None
        text = delta.get("content") if isinstance(delta, dict) else None
        if not isinstance(delta, dict) or not isinstance(text, str | None):
            raise RemoteError(f"{url} sent a choice that is not an OpenAI delta: {shown(choice)}")
        reason = choice.get("finish_reason")
        yield text or "", reason if isinstance(reason, str) else None


def _error_message(data: Any) -> str:
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return shown(error.get("message") or error)
    return shown(error or data)


def _raise_for_status(response: httpx2.Response, url: str, raw: bytes) -> None:
    if response.status_code == 200:
        return
    try:
        message = _error_message(parse_json(raw, url))
    except RemoteError:
        message = shown(raw)
    hint = {
        401: "pass the server's key with --api-key",
        404: "check the URL (it usually ends in /v1) and --remote-model",
    }.get(response.status_code, "see the server's log")
    raise RemoteError(f"{url} answered {response.status_code}: {message} — {hint}")


def wire_content(message: ChatMessage) -> str | list[dict[str, Any]]:
    """A message's content as OpenAI takes it: its text, or with images text and ``image_url``
    parts (inline ``data:`` URLs) in the order they stand."""
    if not message.images:
        return message.content
    parts: list[dict[str, Any]] = []
    start = 0
    for placed in message.images:
        if placed.offset > start:
            parts.append({"type": "text", "text": message.content[start : placed.offset]})
        data = base64.b64encode(placed.image.data).decode("ascii")
        url = f"data:{placed.image.media_type};base64,{data}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
        start = placed.offset
    if start < len(message.content):
        parts.append({"type": "text", "text": message.content[start:]})
    return parts
