"""A remote server's reply in the terms the chat history, figures and export already use.

The chat window records, shows and exports :class:`GenerationResult` and :class:`DecodeStats`.
A remote reply (:class:`RemoteReply`) is turned into those, so a reply from a server goes through
exactly the same paths as a local one. What only a remote reply has — where it came from and the
draft acceptance the server reports (or that it reports none) — becomes the result's note, which
the window shows under the figures and the history and export keep.
"""

from __future__ import annotations

from app.engine.remote.client import RemoteReply
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.core.stats import DecodeStats

REMOTE_MODE = "remote"
NOT_REPORTED = "the server does not report draft acceptance"


def streaming_stats(pieces: int, seconds_to_first_token: float, seconds: float) -> DecodeStats:
    """The figures while a reply streams: each streamed piece counts as one token until the
    server's ``usage`` gives the exact count at the end."""
    return _stats(0, pieces, seconds_to_first_token, seconds)


def acceptance_text(reply: RemoteReply) -> str:
    return reply.acceptance.describe() if reply.acceptance is not None else NOT_REPORTED


def remote_result(reply: RemoteReply, url: str, seed: int) -> GenerationResult:
    """The finished reply as a :class:`GenerationResult` (``seed``: the one sent with it)."""
    tokens = reply.completion_tokens if reply.completion_tokens is not None else 0
    rate = reply.decode_tokens_per_second
    decode_seconds = tokens / rate if rate > 0 else reply.decode_seconds
    stats = _stats(
        reply.prompt_tokens or 0,
        tokens,
        reply.seconds_to_first_token,
        reply.seconds_to_first_token + decode_seconds,
    )
    return GenerationResult(
        text=reply.text,
        token_ids=(),
        prompt_token_count=reply.prompt_tokens or 0,
        finish_reason=reply.finish_reason,
        stats=stats,
        seed=seed,
        note=f"remote: {url} · {acceptance_text(reply)}",
    )


def _stats(prompt_tokens: int, tokens: int, ttft: float, elapsed: float) -> DecodeStats:
    return DecodeStats(
        mode=REMOTE_MODE,
        depth=0,
        prompt_tokens=prompt_tokens,
        generated_tokens=tokens,
        cycles=0,
        drafted_by_depth=(),
        accepted_by_depth=(),
        prefill_seconds=ttft,
        ttft_seconds=ttft,
        elapsed_seconds=max(elapsed, ttft),
        draft_seconds=0.0,
        draft_steps=0,
        verify_seconds=0.0,
        verify_calls=0,
    )
