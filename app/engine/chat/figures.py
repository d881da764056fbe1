"""The figures shown under a reply, worded once for the window and for Markdown export.

Statistics are defined in :mod:`app.engine.runtime.core.stats`; this module only decides how they
read: the first line is what every reply has (tokens, decode speed, time to first token, why it
stopped), the second what only an MTP reply has (depth, acceptance at each depth, mean accepted
length, tokens per cycle), the third — where the depth was "auto" — why it drafted what it did
(:func:`auto_depth_line`: a reply that drafted nothing because drafting measured slower than plain
decoding on this machine says so, with how much of the drafts the head would keep, instead of a
row of 0 % that reads as broken). Under a reply in the window these are the details; what shows at a
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


SUGGESTED_DEPTH = 3
"""The fixed depth offered when auto drafted nothing ("Try MTP depth 3")."""


@dataclass(frozen=True)
class ReplyFigures:
    basics: str
    mtp: str | None
    auto: str | None = None

    def lines(self) -> tuple[str, ...]:
        return tuple(line for line in (self.basics, self.mtp, self.auto) if line is not None)


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
    if drafted_nothing(stats):  # an adaptive reply run plainly: no row of 0 % acceptances
        return ReplyFigures(basics, None, auto_depth_line(stats))
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
    return ReplyFigures(basics, mtp, auto_depth_line(stats))


def drafted_nothing(stats: DecodeStats) -> bool:
    """An adaptive reply whose every cycle drafted nothing (the policy ran it plainly)."""
    return stats.adaptive and stats.depth > 0 and not any(stats.drafted_by_depth)


def suggested_depth(stats: DecodeStats) -> int:
    """The fixed depth to try when auto drafted nothing (3, or less for a shallower head)."""
    return min(SUGGESTED_DEPTH, stats.depth) or SUGGESTED_DEPTH


def auto_depth_line(stats: DecodeStats) -> str | None:
    """Why an adaptive depth drafted what it did, from what it measured on this machine (None
    for a fixed depth, or before anything was measured)."""
    if not stats.adaptive or not stats.auto_depth_rates:
        return None
    plain = stats.auto_plain_rate
    drafting = [
        (rate, depth) for depth, rate in enumerate(stats.auto_depth_rates) if depth and rate
    ]
    kept = stats.auto_kept_through[: suggested_depth(stats)]
    keeps = (
        f"; depth {len(kept)} keeps {' / '.join(f'{share * 100:.0f}' for share in kept)} % of "
        "its drafts"
        if kept
        else ""
    )
    if not drafting or not plain:
        return f"Auto: drafting is still being measured on this machine{keeps}"
    best_rate, best_depth = max(drafting)
    measured = f"depth {best_depth} ran at {best_rate / plain:.2f}× plain decoding's speed"
    if drafted_nothing(stats):
        return (
            f"Auto drafted 0: on this machine a draft costs more than it saves ({measured}){keeps}"
        )
    return (
        f"Auto drafted {stats.mean_draft_depth:.2f} tokens per cycle, the fastest here "
        f"({measured}){keeps}"
    )


def compact_line(stats: DecodeStats, finish_reason: str | None) -> str:
    """One short line: tokens, decode speed, MTP's tokens per cycle, and the stop reason
    unless the model simply ended its turn."""
    parts = [f"{stats.generated_tokens} tokens", f"{stats.decode_tokens_per_second:.1f} tok/s"]
    if drafted_nothing(stats):
        parts.append("MTP auto: no drafts")
    elif stats.depth:
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
