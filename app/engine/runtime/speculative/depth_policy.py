"""Choosing the draft depth of each cycle from what has been measured so far.

The best depth depends on the machine (an extra verify row costs almost nothing where decoding
is memory-bound — a GPU, Apple silicon, a large model — and most of a step for a small model on
a CPU), on the model's head and on the text (acceptance falls at higher temperatures and in
free prose). A fixed depth is right for one of these and wrong for the rest, so the adaptive
policy measures them as it decodes and picks, before each cycle, the depth K (0 = no drafts)
with the most expected tokens per second:

    E[tokens](K) = 1 + Σ_{i ≤ K} Π_{j ≤ i} a_j        time(K) = measured cycle time at K

- a_j is the acceptance at depth j given depths < j were accepted, from counts that decay so
  the estimate follows the text, starting from a_{j−1} (two pseudo-counts) so a depth tried
  only a few times is neither written off nor overrated;
- time(K) is the fastest timed cycle at K within the last few hundred cycles, or of its latest
  visit (:mod:`~app.engine.runtime.speculative.cycle_times`): other work on the machine only ever
  adds time, so the minimum is the cost the depth really has, and a slow moment cannot make a depth
  look slower while a quicker cycle of the last few hundred remains; older costs give way, so a
  machine that really became slower is followed (a minimum kept from a quiet moment long ago once
  made the stand-in at load 5 settle on depth 3, 13 % slower than depth 2; keeping only the latest
  visit's six cycles instead let one slow visit poison a depth). A cycle at K = 0 includes bringing
  the head's cache up to date, so deferring that work does not flatter it. Only a cycle that follows
  one of the same depth is timed: the first after a change pays for llama.cpp rebuilding its compute
  graph, which steady decoding at that depth does not. Times come from the backend's cycle clock: on
  a one-thread CPU backend the decoding thread's CPU time, which other processes do not advance
  (wall times of one cycle varied 3× under load, CPU times ~1.3×);
- it starts with ``CYCLES_PER_TRIAL`` cycles each at depths 1, 2 and 0 (the first of each is
  not timed, so three give two timings: one alone let a single noisy cycle decide, and on the
  memory-bound stand-in sent it to depth 0 for a whole reply), and from then on tries
  a neighbour of its choice (alternately deeper and shallower) every ``EXPLORE_EVERY`` cycles —
  sooner for a depth never measured, less often the more clearly that neighbour lost — so it
  climbs to deeper depths where they pay and nothing goes stale;
- a change of depth has a price of its own (llama.cpp rebuilds its compute graph for a new
  batch shape, and the head's cache is caught up after a depth-0 stretch): on a CPU it is most
  of a plain step. The first cycle after a change measures it, and trials are spaced so that
  their changes cost at most ``EXPLORATION_SHARE`` of the decoding time. Steady cycles leave
  their depth only for one at least ``SWITCH_MARGIN`` faster: on the stand-in depths 1 and 2
  measured within noise of each other, and flipping between them cost a 1–4 ms rebuild on a
  ~17 ms cycle each time;
- after more than ``SHORT_STRETCH`` cycles at depth 0 it stays there until the next request,
  trials included: drafting resumes by catching the head's cache up on every token since it
  last drafted, a cost in proportion to the stretch (measured: ~8 % of the stretch's time on
  the demo model), which spacing trials cannot shrink but a short stretch avoids.

Whether a request drafts at all is decided before it starts, once per request: a request without
drafts runs on a target context that keeps no recurrent-state snapshots (a plain step there is
faster than a depth-0 cycle of a drafting request, ~10 % on the demo model), but it cannot
draft, because a rejected draft could not be rolled back. So the policy keeps one more timing,
of those plain steps, and runs requests plainly while plain decoding is faster than the best
depth ≥ 1 of a drafting request (and than depth 0, which is a plain step plus snapshots).
Until plain steps were timed, they are taken to be ``PLAIN_PRIOR_GAIN`` × as fast as depth-0
cycles, and a plain request is tried after ~128 tokens unless drafting wins by
``UNMEASURED_PLAIN_MARGIN`` × or more (a depth-0 rate from the opening trials' few cycles is
too noisy to decide alone). The losing way is run again now and then, a drafting check opening
with a trial at depth 1, so a machine, model or text where it starts to pay is noticed. A check
costs the whole request's difference, so checks come after ``CHECK_EVERY_TOKENS`` tokens, more
the more clearly the loser lost — but a new winner must first be confirmed: the first check
after the winner changes comes after ``FIRST_CHECK_TOKENS`` tokens, and each check the loser
loses again doubles the wait until that spacing is reached. Without it one slow moment
locked requests into the wrong way: on this 2-core VM every cycle of one drafting request took
up to twice its usual CPU time (fixed-depth requests just before and after ran at their usual
speed; the cause was not pinned down), the plain steps timed earlier then looked 1.6× faster
than drafting, and that "clear" loss put drafting's next check 16 K tokens away — the stand-in
ran 44 requests in a row plainly, at 0.87× the speed of fixed depth 1.

Cycle costs belong to the machine and the model, not to one request, so the worker keeps one policy
per loaded model and maximum depth (:class:`DepthPolicies`), and saves its state after each request
(:mod:`~app.engine.runtime.speculative.depth_memory`, keyed by model file and machine): the starting
trials happen once per model and machine, and neither a short reply nor a restart pays for them
again.

The choice depends only on cycles already committed, never on the current cycle's draws, so
every cycle stays an exact speculative-sampling step: output follows the target distribution,
and greedy output equals plain decoding whatever depths are chosen.
"""

from __future__ import annotations

import logging
import statistics
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.engine.runtime.sampling.draft_confidence import ConfidenceStop
from app.engine.runtime.speculative.cycle_times import CycleTimes
from app.engine.runtime.speculative.depth_memory import DepthMemory, model_identity
from app.engine.runtime.speculative.draft_health import DraftHealth

AUTO = "auto"
DEFAULT_MTP_DEPTH: int | str = AUTO
"""What a user gets without choosing: the CLI, the chat window and a server all start from it."""
AUTO_MAX_DEPTH = 4
EXPLORE_EVERY = 40
MAX_TRIAL_SPACING = 16.0
CYCLES_PER_TRIAL = 3
PRIOR_WEIGHT = 2.0
ACCEPTANCE_MEMORY = 0.97
EXPLORATION_SHARE = 0.01
SHORT_STRETCH = 8
CHANGES_KEPT = 6
SWITCH_MARGIN = 0.03
PLAIN_PRIOR_GAIN = 1.1
CHECK_EVERY_TOKENS = 1024.0
CHECK_SPACING_POWER = 6
UNMEASURED_PLAIN_MARGIN = 1.5
FIRST_CHECK_TOKENS = 256.0
SETTLED = 8  # confirmations after which FIRST_CHECK_TOKENS × 2^n exceeds every check spacing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DepthEstimate:
    """What an adaptive depth knows about this model on this machine, for a reply's Details.

    ``plain``: tokens per second of plain decoding (0 until measured or estimated);
    ``rates[k]``: expected tokens per second drafting k tokens per cycle (0 until a cycle at k was
    timed); ``kept_through[j - 1]``: the share of cycles whose drafts are kept through depth j.
    """

    plain: float
    rates: tuple[float, ...]
    kept_through: tuple[float, ...]


class DepthPolicy(Protocol):
    """Picks each cycle's draft depth and learns from the cycle's outcome."""

    def estimate(self) -> DepthEstimate | None:
        """What the policy measured so far (None: a fixed depth measures nothing)."""
        ...

    @property
    def drafts_this_request(self) -> bool:
        """False: the request decodes plainly (prefill without the head; every depth is 0)."""
        ...

    def put_off_check(self) -> bool:
        """This request was to check the losing way (plain vs drafting); run it the winning
        way instead and check on a later request. False when it was no check."""
        ...

    def choose(self, limit: int) -> int:
        """The depth of the next cycle, at most ``limit``."""
        ...

    def observe(self, depth: int, accepted: int, seconds: float) -> None:
        """A cycle drafted ``depth`` tokens, kept ``accepted`` of them and took ``seconds``."""
        ...


class FixedDepth:
    """The depth the user chose, every cycle (less only when the reply or context ends)."""

    def __init__(self, depth: int) -> None:
        self._depth = depth

    def estimate(self) -> DepthEstimate | None:
        return None

    @property
    def drafts_this_request(self) -> bool:
        return self._depth > 0

    def put_off_check(self) -> bool:
        return False

    def choose(self, limit: int) -> int:
        return min(self._depth, limit)

    def observe(self, depth: int, accepted: int, seconds: float) -> None:
        """A fixed depth learns nothing."""


class AdaptiveDepth:
    """The depth in 0..``max_depth`` with the most expected tokens per second (see module)."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self._trials = [0.0] * (max_depth + 1)  # index j: cycles that tried depth j
        self._kept = [0.0] * (max_depth + 1)  # ... and kept the draft at depth j
        self._timed: dict[int, CycleTimes] = {}
        self._observed = 0  # cycles and plain steps observed: the age of a timing
        self._change_costs: deque[float] = deque(maxlen=CHANGES_KEPT)
        self._pending = [
            depth
            for depth in (*range(1, min(max_depth, 2) + 1), 0)
            for _ in range(CYCLES_PER_TRIAL)
        ]
        self._previous_depth: int | None = None
        self._steady: int | None = None  # the depth steady cycles last ran at
        self._stretch = 0  # cycles at depth 0 since this request last drafted
        self._since_trial = 0
        self._explore_up = True
        self._plain_timed = CycleTimes()  # plain requests' steps
        self._since_check = 0.0  # tokens since the losing way (plain / drafting) last ran
        self._check_put_off: tuple[bool, float, int] | None = None
        self._winner: bool | None = None  # the way (True: drafting) that won the last decision
        self._confirmations = SETTLED  # checks the loser lost since the winner last changed
        self._drafting = True  # this request drafts

    def to_state(self) -> dict[str, Any]:
        """What was learned, as JSON-ready values (see :meth:`restore`)."""
        return {
            "trials": self._trials,
            "kept": self._kept,
            "timed": {str(depth): times.saved() for depth, times in self._timed.items()},
            "change_costs": list(self._change_costs),
            "plain_timed": self._plain_timed.saved(),
            "winner": self._winner,
            "confirmations": self._confirmations,
        }

    def restore(self, state: dict[str, Any]) -> bool:
        """Take up a saved state; False (and nothing changed) when it does not fit this policy.

        With cycle times for two or more depths saved, the opening trials are skipped: the
        policy starts at the depth that was fastest and keeps checking its neighbours.
        """
        size = self.max_depth + 1
        try:
            trials = [float(value) for value in state["trials"]]
            kept = [float(value) for value in state["kept"]]
            timed = {
                int(depth): [float(t) for t in times] for depth, times in state["timed"].items()
            }
            change_costs = [float(cost) for cost in state.get("change_costs", [])]
            plain_timed = [float(t) for t in state.get("plain_timed", [])]
            winner = state.get("winner")
            confirmations = int(state.get("confirmations", SETTLED))
        except (KeyError, TypeError, ValueError, AttributeError):
            return False
        if (
            len(trials) != size
            or len(kept) != size
            or not all(0 <= depth < size and times for depth, times in timed.items())
            or any(t <= 0 for times in timed.values() for t in times)
            or any(t <= 0 for t in plain_timed)
            or winner not in (None, True, False)
            or confirmations < 0
        ):
            return False
        self._trials, self._kept = trials, kept
        self._timed = {depth: CycleTimes(times) for depth, times in timed.items()}
        self._change_costs = deque(change_costs, maxlen=CHANGES_KEPT)
        self._plain_timed = CycleTimes(plain_timed)
        self._winner, self._confirmations = winner, confirmations
        if len(timed) >= 2:
            self._pending = []
        return True

    def new_request(self) -> None:
        """Decide whether the next request drafts; its first cycle follows a prefill, not a
        cycle, so it is not timed as a steady one."""
        self._check_put_off = None
        self._previous_depth = None
        self._stretch = 0
        drafting = self._drafting_wins()
        if len(self._timed) < 2 or drafting is None:
            self._drafting = True  # the opening trials
            return
        winner, loser, wins_by = drafting
        if self._winner is not None and winner != self._winner:
            self._confirmations = 0  # a new winner: confirm it soon
        self._winner = winner
        spacing = min(wins_by**CHECK_SPACING_POWER, MAX_TRIAL_SPACING)
        if not self._plain_timed and wins_by < UNMEASURED_PLAIN_MARGIN:
            spacing = 1 / 8  # plain steps never timed and the estimate not far off: find out
        unconfirmed = FIRST_CHECK_TOKENS * 2.0 ** min(self._confirmations, SETTLED)
        check = self._since_check >= min(CHECK_EVERY_TOKENS * spacing, unconfirmed)
        self._drafting = loser if check else winner
        self._check_put_off = (winner, self._since_check, self._confirmations) if check else None
        if check:
            self._since_check = 0.0
            self._confirmations = min(self._confirmations + 1, SETTLED)
        if not self._drafting:
            self._pending = []  # a trial left over from the last request waits for a check
        elif check and not winner:  # a check of drafting opens with a trial of depth 1
            self._pending = [1] * CYCLES_PER_TRIAL

    @property
    def drafts_this_request(self) -> bool:
        return self._drafting

    def put_off_check(self) -> bool:
        """Used when the check would first recompute a long prompt whose state is kept only on
        the winner's side (prefix reuse keeps plain and drafting requests' states apart)."""
        if self._check_put_off is None:
            return False
        self._drafting, self._since_check, self._confirmations = self._check_put_off
        self._check_put_off = None
        self._pending = []
        return True

    def plain_tokens_per_second(self) -> float | None:
        """Tokens per second of plain requests: measured, else estimated from depth 0."""
        if self._plain_timed:
            return 1.0 / self._plain_timed.fastest(self._observed)
        depth_zero = self._timed.get(0)
        return PLAIN_PRIOR_GAIN / depth_zero.fastest(self._observed) if depth_zero else None

    def _drafting_wins(self) -> tuple[bool, bool, float] | None:
        """(winner, loser, winner's rate / loser's) of drafting (True: its best depth ≥ 1) vs
        plain requests, or None before both can be rated."""
        rates = self.tokens_per_second()
        drafted = [rate for rate in rates[1:] if rate is not None]
        plain = self.plain_tokens_per_second()
        if not drafted or plain is None:
            return None
        # A plain request does a depth-0 cycle's work minus the snapshots, so it is never
        # slower than one: a depth-0 cycle timed faster only saw a quieter moment.
        plain = max(plain, rates[0] or 0.0)
        best = max(drafted)
        if best > plain:
            return True, False, best / plain
        return False, True, plain / best

    def kept_through(self) -> list[float]:
        """The share of cycles whose drafts are kept through depth 1..max_depth: the running
        product of each depth's acceptance a_j, whose prior is a_{j−1}."""
        kept: list[float] = []
        product, acceptance = 1.0, 0.5  # the prior of a_1
        for depth in range(1, self.max_depth + 1):
            acceptance = (self._kept[depth] + PRIOR_WEIGHT * acceptance) / (
                self._trials[depth] + PRIOR_WEIGHT
            )
            product *= acceptance
            kept.append(product)
        return kept

    def tokens_per_second(self) -> list[float | None]:
        """Expected tokens per second at each depth 0..max_depth (None until a cycle at it was
        timed): 1 + the kept-through shares up to it, over its fastest timed cycle."""
        kept = self.kept_through()
        rates: list[float | None] = []
        for depth in range(self.max_depth + 1):
            timed = self._timed.get(depth)
            tokens = 1.0 + sum(kept[:depth])
            rates.append(tokens / timed.fastest(self._observed) if timed else None)
        return rates

    def estimate(self) -> DepthEstimate:
        return DepthEstimate(
            plain=self.plain_tokens_per_second() or 0.0,
            rates=tuple(rate or 0.0 for rate in self.tokens_per_second()),
            kept_through=tuple(self.kept_through()),
        )

    def best_depth(self, limit: int) -> int:
        return self._best(self.tokens_per_second(), limit)

    def choose(self, limit: int) -> int:
        if not self._drafting:
            return 0
        rates = self.tokens_per_second()
        if not self._pending:
            self._since_trial += 1
            best = self._best(rates, self.max_depth)
            neighbour = self._neighbour(best)
            interval = max(
                self._trial_interval(rates[best], rates[neighbour]), self._changes_allow(best)
            )
            if self._since_trial >= interval and (best != 0 or self._may_draft()):
                self._pending = [neighbour] * CYCLES_PER_TRIAL
                self._explore_up = not self._explore_up
                self._since_trial = 0
        if self._pending:
            return min(self._pending.pop(0), limit)
        best = self._best(rates, limit)
        steady = self._steady
        if (
            steady is not None
            and steady != best
            and steady <= limit
            and (rate := rates[steady]) is not None
            and rates[best] < rate * (1.0 + SWITCH_MARGIN)
        ):
            best = steady  # not worth a change of depth
        self._steady = best
        return best if best == 0 or self._may_draft() else 0

    def _may_draft(self) -> bool:
        """Drafting now would catch the head up on at most ``SHORT_STRETCH`` tokens."""
        return self._stretch <= SHORT_STRETCH

    def observe(self, depth: int, accepted: int, seconds: float) -> None:
        self._since_check += accepted + 1
        self._observed += 1
        if not self._drafting:
            if self._previous_depth == 0 and seconds > 0:
                self._plain_timed.add(seconds, self._observed)
            self._previous_depth = 0
            return
        for level in range(1, depth + 1):
            self._trials[level] = self._trials[level] * ACCEPTANCE_MEMORY + 1.0
            kept = 1.0 if level <= accepted else 0.0
            self._kept[level] = self._kept[level] * ACCEPTANCE_MEMORY + kept
            if not kept:
                break
        self._stretch = self._stretch + 1 if depth == 0 else 0
        timed = self._timed.get(depth)
        if depth == self._previous_depth and seconds > 0:
            if timed is None:
                timed = self._timed[depth] = CycleTimes()
            timed.add(seconds, self._observed)
        elif self._previous_depth is not None and timed:
            self._change_costs.append(max(0.0, seconds - timed.fastest(self._observed)))
        self._previous_depth = depth

    def _changes_allow(self, best: int) -> float:
        """Cycles between trials that keep their two changes of depth within
        ``EXPLORATION_SHARE`` of the time (0 until a change was measured)."""
        steady = self._timed.get(best)
        if not self._change_costs or not steady:
            return 0.0
        change = statistics.median(self._change_costs)
        cycles = 2 * change / (EXPLORATION_SHARE * steady.fastest(self._observed))
        return min(cycles, EXPLORE_EVERY * MAX_TRIAL_SPACING)

    def _best(self, rates: list[float | None], limit: int) -> int:
        """The fastest timed depth up to ``limit`` (the shallower on a tie)."""
        timed = [depth for depth, rate in enumerate(rates[: limit + 1]) if rate is not None]
        return max(timed, key=rates.__getitem__) if timed else min(limit, self.max_depth)

    @staticmethod
    def _trial_interval(best_rate: float | None, other_rate: float | None) -> float:
        """Cycles between trials: longer the worse the neighbour measured, since re-checking a
        depth that lost clearly costs more than it is likely to find."""
        if not best_rate:
            return EXPLORE_EVERY
        if not other_rate:
            return EXPLORE_EVERY / 4  # never measured: find out soon
        return EXPLORE_EVERY * min((best_rate / other_rate) ** 4, MAX_TRIAL_SPACING)

    def _neighbour(self, depth: int) -> int:
        """The depth to re-measure: alternately one deeper and one shallower than ``depth``."""
        deeper, shallower = depth + 1, depth - 1
        if deeper > self.max_depth:
            return max(shallower, 0)
        if shallower < 0 or self._explore_up:
            return deeper
        return shallower


class DepthPolicies:
    """The depth policy of each request to one loaded model; adaptive ones live on.

    With ``remember`` (the worker's case) an adaptive policy starts from the state saved for
    the same model file and machine, and :meth:`save` keeps what it learned for the next
    session; ``memory`` defaults to the file in the app's data folder.
    """

    def __init__(self, memory: DepthMemory | None = None, *, remember: bool = True) -> None:
        self._memory = memory or (DepthMemory.in_app_data() if remember else None)
        self.draft_health = DraftHealth(self._memory.path.parent if self._memory else None)
        """Whether drafting pays at all on this backend (stops it when drafts are garbage)."""
        self._adaptive: dict[int, AdaptiveDepth] = {}
        self.confidence = ConfidenceStop()
        """Which of the head's confidence bands were accepted, for ``stop_unsure_drafts``."""
        self._keys: dict[int, str] = {}
        self._identities: dict[Path, str] = {}

    def for_request(
        self, max_depth: int, *, adaptive: bool, model: Path | None = None, machine: str = ""
    ) -> DepthPolicy:
        """``model`` (the file) and ``machine`` (the backend's performance fingerprint) key
        the saved state of an adaptive policy."""
        if not adaptive or max_depth == 0:
            return FixedDepth(max_depth)
        policy = self._adaptive.get(max_depth)
        if policy is None:
            policy = self._adaptive[max_depth] = AdaptiveDepth(max_depth)
            self._take_up_saved(policy, model, machine)
        policy.new_request()
        return policy

    def save(self) -> None:
        """Write each adaptive policy's state under its key (a no-op without memory)."""
        self.draft_health.save()
        if self._memory is None:
            return
        for max_depth, key in self._keys.items():
            self._memory.save(key, self._adaptive[max_depth].to_state())

    def _take_up_saved(self, policy: AdaptiveDepth, model: Path | None, machine: str) -> None:
        if self._memory is None or model is None:
            return
        try:
            identity = self._identities.get(model) or model_identity(model)
        except OSError as exc:
            log.warning("not keeping the adaptive depth's state for %s: %s", model, exc)
            return
        self._identities[model] = identity
        key = f"{identity}|{machine}|max{policy.max_depth}"
        self._keys[policy.max_depth] = key
        saved = self._memory.load(key)
        if saved is not None and not policy.restore(saved):
            log.warning(
                "ignoring the saved adaptive depth state for %s in %s (it does not fit this "
                "version); learning starts afresh",
                model.name,
                self._memory.path,
            )
