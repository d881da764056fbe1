"""Which byte ranges to fetch: tensor spans merged into runs, one streamed read per run.

On a Hub source every run is one ranged GET, so adjacent or nearly adjacent tensors of a shard are
merged; the bytes between them are read and dropped. The gaps bridged are the smallest first and
their total stays within a budget, which is what bounds bytes read to a few percent over bytes
needed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from app.engine.mtp.header import StoredTensor

MAX_BRIDGED_GAP = 16 << 20
"""A gap this large costs more to read than a separate request does."""


@dataclass(frozen=True)
class ReadRun:
    """One contiguous byte range of a shard and the tensors inside it, in offset order."""

    shard: str
    start: int
    end: int
    tensors: tuple[StoredTensor, ...]

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def wasted(self) -> int:
        return self.length - sum(t.nbytes for t in self.tensors)


def plan_runs(tensors: Iterable[StoredTensor], waste_budget: int) -> tuple[ReadRun, ...]:
    """Runs covering every non-empty tensor, in (shard, offset) order.

    Gaps between consecutive tensors of a shard are bridged smallest first while their total
    stays within ``waste_budget`` bytes and each is at most :data:`MAX_BRIDGED_GAP`.
    """
    ordered = sorted((t for t in tensors if t.nbytes), key=lambda t: (t.shard, t.start))
    gaps = [
        (after.start - before.end, i)
        for i, (before, after) in enumerate(itertools.pairwise(ordered))
        if before.shard == after.shard and after.start - before.end <= MAX_BRIDGED_GAP
    ]
    bridged: set[int] = set()
    spent = 0
    for gap, i in sorted(gaps):
        if spent + gap > waste_budget:
            break
        spent += gap
        bridged.add(i)
    runs: list[ReadRun] = []
    members: list[StoredTensor] = []
    for i, tensor in enumerate(ordered):
        members.append(tensor)
        if i not in bridged:
            runs.append(ReadRun(tensor.shard, members[0].start, tensor.end, tuple(members)))
            members = []
    return tuple(runs)
