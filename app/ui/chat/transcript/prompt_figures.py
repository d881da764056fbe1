"""The prompt line of a reply's Details: how many prompt tokens the reply started from, how many
of them were reused from the state the runtime kept since earlier turns, and how long computing
the rest took; and how many pictures went through the vision encoder for it (none when the picture
was already in the kept state: a follow-up or a regenerated reply about the same picture).

Reuse is why a long conversation can answer its next message at once: only the new message runs
through the model (``DecodeStats.prompt_computed_tokens``), the rest was kept
(``DecodeStats.prompt_reused_tokens``). A remote server may reuse its own cache, but it does not
say how much, so a remote reply gives the prompt's size only.
"""

from __future__ import annotations

from app.engine.chat.remote_reply import REMOTE_MODE
from app.engine.runtime.core.stats import DecodeStats

REMOTE_REUSE_UNKNOWN = "the server does not say how many it reused"


def prompt_line(stats: DecodeStats) -> str | None:
    """ "Prompt: 2,013 tokens, 1,950 reused from earlier turns, 63 computed in 48 ms" (None while
    the prompt's size is not known, as for a remote reply still streaming)."""
    if stats.prompt_tokens <= 0:
        return None
    prompt = f"Prompt: {_tokens(stats.prompt_tokens)}"
    if stats.mode == REMOTE_MODE:
        return f"{prompt} ({REMOTE_REUSE_UNKNOWN})"
    computed_in = f"in {stats.prefill_seconds * 1000:,.0f} ms"
    encoded = stats.prompt_images_encoded
    if encoded > 0:
        computed_in += f" ({encoded} picture{'s' if encoded > 1 else ''} encoded)"
    if stats.prompt_reused_tokens <= 0:
        return f"{prompt}, all computed {computed_in}"
    return (
        f"{prompt}, {stats.prompt_reused_tokens:,} reused from earlier turns, "
        f"{stats.prompt_computed_tokens:,} computed {computed_in}"
    )


def _tokens(count: int) -> str:
    return f"{count:,} token" if count == 1 else f"{count:,} tokens"
