"""The figures shown under a reply, worded once for the window and for Markdown export.

Statistics are defined in :mod:`app.engine.runtime.core.stats`; this module only decides how they
read: the first line is what every reply has (tokens, decode speed, time to first token, why it
stopped), the second what only an MTP reply has (depth, acceptance at each depth, mean accepted
length, tokens per cycle). Under a reply in the window these are the details; what shows at a
glance is the compact line (tokens, speed, MTP's tokens per cycle, an unusual stop) and the
speedup against the model's measured plain speed (:mod:`app.engine.chat.plain_speed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.chat.plain_speed import (
    BADGE_MIN_SPEEDUP,
    MIN_MEASURED_TOKENS,
    Speedup,
    measurable,
)
from app.engine.runtime.core.stats import DecodeStats

STOP_REASONS = {
    "stop": "end of turn",
    "length": "max tokens",
    "context": "context full",
    "cancelled": "stopped",
    "failed": "failed",
    "interrupted": "interrupted",
}
USUAL_STOP = "stop"
TOO_SHORT_TEXT = (
    f"Too short to compare with plain decoding (fewer than {MIN_MEASURED_TOKENS} tokens)."
)
NOT_MEASURED_TEXT = (
    "Plain speed not measured yet: send one message with MTP off (or use Compare) and MTP "
    "replies will show how much faster they are."
)


@dataclass(frozen=True)
class ReplyFigures:
    basics: str
    mtp: str | None

    def lines(self) -> tuple[str, ...]:
        return (self.basics,) if self.mtp is None else (self.basics, self.mtp)


def stop_reason_text(finish_reason: str) -> str:
    return STOP_REASONS.get(finish_reason, finish_reason)


def reply_figures(stats: DecodeStats, finish_reason: str | None) -> ReplyFigures:
    """The reply's figures; ``finish_reason`` None while it still streams."""
    reason = "generating…" if finish_reason is None else stop_reason_text(finish_reason)
    basics = " · ".join(
        (
            f"{stats.generated_tokens} tokens",
            f"{stats.decode_tokens_per_second:.1f} tok/s",
            f"TTFT {stats.ttft_seconds * 1000:.0f} ms",
            reason,
        )
    )
    if stats.depth == 0:
        return ReplyFigures(basics, None)
    acceptance = " / ".join(f"{rate:.0%}" for rate in stats.acceptance_by_depth)
    mode = "Leviathan–Chen" if stats.mode == "lc" else "sample-and-compare"
    mtp = " · ".join(
        (
            (
                f"MTP auto depth, {stats.mean_draft_depth:.2f} drafts/cycle ({mode})"
                if stats.adaptive
                else f"MTP depth {stats.depth} ({mode})"
            ),
            f"acceptance by depth {acceptance}",
            f"mean accepted {stats.mean_accepted_length:.2f}",
            f"{stats.tokens_per_cycle:.2f} tokens/cycle",
        )
    )
    return ReplyFigures(basics, mtp)


def compact_line(stats: DecodeStats, finish_reason: str | None) -> str:
    """One short line: tokens, decode speed, MTP's tokens per cycle, and the stop reason
    unless the model simply ended its turn."""
    parts = [f"{stats.generated_tokens} tokens", f"{stats.decode_tokens_per_second:.1f} tok/s"]
    if stats.depth:
        parts.append(f"MTP {stats.tokens_per_cycle:.2f} tokens/cycle")
    if finish_reason is None:
        parts.append("generating…")
    elif finish_reason != USUAL_STOP:
        parts.append(stop_reason_text(finish_reason))
    return " · ".join(parts)


def badge_text(speedup: Speedup) -> str:
    return f"MTP ×{speedup.ratio:.1f} faster"


def speedup_line(stats: DecodeStats, speedup: Speedup | None) -> str | None:
    """How this MTP reply's speed compares with the model's measured plain speed (None for a
    plain reply)."""
    if stats.depth == 0:
        return None
    if not measurable(stats):
        return TOO_SHORT_TEXT
    if speedup is None:
        return NOT_MEASURED_TEXT
    plain = speedup.plain
    line = (
        f"MTP ×{speedup.ratio:.2f} against this model's plain speed, "
        f"{plain.tokens_per_second:.1f} tok/s (median of {plain.replies} plain "
        f"{'reply' if plain.replies == 1 else 'replies'} on this machine)"
    )
    if not speedup.earns_badge:
        line += f"; below ×{BADGE_MIN_SPEEDUP:.1f}, so no badge"
    return line
