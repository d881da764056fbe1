"""Whether a quantisation of a model would fit this machine, judged before downloading it.

Search lists quantisations the user has not downloaded, so only their file size and, where the
repo or its base model has a config.json, the model's shape are known. With a shape, the chat
memory estimate (:mod:`app.engine.chat.memory`) is taken at the context the runtime would choose
(:mod:`app.engine.chat.context_choice`: the largest that fits, at least 2,048 tokens) with MTP
on, the default KV cache type and the default kept-state budget, and judged as the model bar
judges it: within 60 % of RAM fits, within 90 % is tight. Without a shape the file size alone is
judged, and the verdict says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.chat.context_choice import FIT_SHARE, choose_context
from app.engine.chat.memory import ModelShape, estimate_memory
from app.engine.load_options import LoadOptions

TIGHT_SHARE = 0.9
FITS = "fits"
TIGHT = "tight"
TOO_BIG = "too big"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Fit:
    """The verdict for one quantisation, with the figures behind it."""

    verdict: str
    """:data:`FITS`, :data:`TIGHT`, :data:`TOO_BIG` or :data:`UNKNOWN` (RAM unknown)."""
    estimate_bytes: int
    context: int
    """The context the estimate is for (0: file size alone, the model's shape is unknown)."""

    @property
    def mark(self) -> str:
        """A short mark for a table cell: ✓ fits, ~ tight, ✗ too big, ? unknown."""
        return {FITS: "✓", TIGHT: "~", TOO_BIG: "✗"}.get(self.verdict, "?")


def judge_fit(size_bytes: int, shape: ModelShape | None, memory_bytes: int | None) -> Fit:
    """The fit of a ``size_bytes`` quantisation of a model of ``shape`` (None: unknown)."""
    options = LoadOptions()
    if shape is None:
        estimate_bytes, context = size_bytes, 0
    else:
        choice = choose_context(
            size_bytes,
            shape,
            with_mtp=True,
            kv_cache_type=options.kv_cache_type,
            state_cache_mib=options.state_cache_mib,
            memory_bytes=memory_bytes,
        )
        estimate = estimate_memory(
            size_bytes,
            shape,
            with_mtp=True,
            context=choice.context,
            kv_cache_type=options.kv_cache_type,
            state_cache_mib=options.state_cache_mib,
        )
        estimate_bytes, context = estimate.total_bytes, choice.context
    if memory_bytes is None:
        return Fit(UNKNOWN, estimate_bytes, context)
    share = estimate_bytes / memory_bytes
    verdict = FITS if share <= FIT_SHARE else TIGHT if share <= TIGHT_SHARE else TOO_BIG
    return Fit(verdict, estimate_bytes, context)
