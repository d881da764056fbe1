"""The ``mtp`` extension field both APIs add to their replies: what speculative decoding did.

It holds the request's :class:`DecodeStats` as ``DecodeStats.to_dict`` writes them (drafted and
accepted by depth, acceptance, tokens per cycle, drafts per cycle, decode tok/s, TTFT …). Its
``depth`` is ``"auto"`` where the depth was chosen each cycle (``max_depth`` is then the deepest
it could draft, ``mean_draft_depth`` what it drafted per cycle on average), else the fixed
depth. Remote clients (``chat --endpoint``) read it back.
"""

from __future__ import annotations

from typing import Any

from app.engine.runtime.core.stats import DecodeStats
from app.engine.server.core.depth import reported_depth

MTP_EXTENSION = "mtp"


def mtp_extension(stats: DecodeStats) -> dict[str, Any]:
    return {**stats.to_dict(), "depth": reported_depth(stats), "max_depth": stats.depth}
