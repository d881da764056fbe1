"""The recent cost of a cycle at one depth: the fastest one timed in the last few hundred cycles.

Other work on the machine only ever adds time to a cycle, so the fastest recent one is the
cost the depth really has. "Recent" has two failure modes, both seen on this 2-core VM:

- too short (the last six cycles of the latest visit, as the adaptive depth first kept): a slow
  moment — every cycle of a request or two taking up to twice its usual CPU time, in fixed and
  adaptive requests alike — replaced every good sample of whichever depths it hit, and the
  policy then ran the wrong depth, or plain requests, until that depth was measured again;
- too long (the fastest ever): a machine that really became slower, under a sustained load,
  keeps the cost of a quiet moment long gone for the depth it no longer visits.

So the fastest cycle is kept per bucket of ``BUCKET_CYCLES`` cycles, buckets older than
``HORIZON_CYCLES`` cycles give way, and the latest bucket always stays, so a depth tried only
now and then keeps its last measured cost. Ages count every cycle or plain step the policy
observed, drafting or not.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

BUCKET_CYCLES = 16
HORIZON_CYCLES = 400
_MAX_BUCKETS = HORIZON_CYCLES // BUCKET_CYCLES + 2


class CycleTimes:
    """The fastest timed cycle of each recent bucket; :meth:`fastest` is the cost to use."""

    def __init__(self, saved: Iterable[float] = ()) -> None:
        """``saved``: :meth:`saved` of an earlier session, each a bucket starting at cycle 0."""
        self._buckets: deque[list[float]] = deque(maxlen=_MAX_BUCKETS)  # [start, fastest]
        for seconds in saved:
            self._buckets.append([0.0, float(seconds)])
        self._fastest = self._fastest_bucket()  # kept up to date: read before every cycle

    def __bool__(self) -> bool:
        return bool(self._buckets)

    def add(self, seconds: float, now: int) -> None:
        """A cycle timed at ``seconds``, the ``now``-th cycle the policy observed."""
        if self._buckets and now - self._buckets[-1][0] < BUCKET_CYCLES:
            bucket = self._buckets[-1]
            bucket[1] = min(bucket[1], seconds)
            self._fastest = min(self._fastest, seconds)
        else:
            full = len(self._buckets) == self._buckets.maxlen
            self._buckets.append([float(now), seconds])  # drops the oldest when full
            self._fastest = self._fastest_bucket() if full else min(self._fastest, seconds)
        self._forget_before(now)

    def fastest(self, now: int) -> float:
        """The fastest cycle of the buckets within the horizon (at least the latest one)."""
        self._forget_before(now)
        return self._fastest

    def saved(self) -> list[float]:
        """Each bucket's fastest cycle, oldest first (restored as buckets of a new session)."""
        return [bucket[1] for bucket in self._buckets]

    def _forget_before(self, now: int) -> None:
        forgot = False
        while len(self._buckets) > 1 and now - self._buckets[0][0] > HORIZON_CYCLES:
            self._buckets.popleft()
            forgot = True
        if forgot:
            self._fastest = self._fastest_bucket()

    def _fastest_bucket(self) -> float:
        return min((bucket[1] for bucket in self._buckets), default=float("inf"))
