"""Decoding statistics, defined once (docs/architecture.md#statistics), shown the same everywhere.

The generation loop feeds a :class:`StatsRecorder`; what leaves the engine (streamed with each
chunk of tokens and attached to the final result) is the frozen :class:`DecodeStats` snapshot,
whose derived figures are properties so no front end re-derives them differently.

Definitions:
- ``drafted_by_depth[i]``: cycles that drafted a token at depth i + 1;
  ``accepted_by_depth[i]``: cycles whose whole draft prefix through depth i + 1 was accepted.
  Acceptance at a depth = accepted / drafted.
- mean accepted length = accepted drafts per cycle (0..K); tokens per cycle = that + 1;
  mean draft depth = drafts per cycle (K, or less where the depth adapts per cycle).
- decode tok/s = generated tokens / (elapsed − prefill time); TTFT = time to the first token.
- host time per token = (decode time − time inside the model's forward passes) / generated
  tokens: what the loop around the model costs (sampling, acceptance, detokenising, stop rules,
  statistics, sending chunks); model time per token = the rest.
- c = cost of one draft step / cost of one verify call, both measured in the same request.
- Leviathan's expected speedup (1 − α^{K+1}) / ((1 − α)(K·c + 1)), with α the per-token
  acceptance that reproduces the measured tokens per cycle under the i.i.d. model.
- Where the depth adapts per cycle, K is not one number: the cycles that drafted exactly k
  tokens (read off ``drafted_by_depth``) each count with their own k, both in solving for α and
  in the speedup (expected tokens over expected cost, summed over those cycles). Using the
  largest depth instead understated α: 8 cycles that drafted one token each, 5 kept, is α 0.625,
  not the 0.39 that depth 4 gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

_ALPHA_BISECTION_STEPS = 60


def expected_speedup(alpha: float, depth: int, cost_ratio: float) -> float:
    """Leviathan et al.'s expected walltime improvement for acceptance α, depth K, cost c."""
    return expected_tokens_per_cycle(alpha, depth) / (depth * cost_ratio + 1.0)


def expected_tokens_per_cycle(alpha: float, depth: int) -> float:
    """(1 − α^{K+1}) / (1 − α): tokens a cycle yields when each draft is kept with prob. α."""
    if alpha >= 1.0:
        return float(depth + 1)
    return (1.0 - alpha ** (depth + 1)) / (1.0 - alpha)


DepthMix = Sequence[tuple[int, int]]
"""``(depth, cycles)`` pairs: how many cycles drafted exactly that many tokens."""


def alpha_for_tokens_per_cycle(tokens_per_cycle: float, depth: int | DepthMix) -> float:
    """The per-token acceptance α whose expected tokens per cycle equals the measured one;
    ``depth`` is the one depth every cycle drafted, or the mix of depths the cycles drafted."""
    mix = [(depth, 1)] if isinstance(depth, int) else [(k, n) for k, n in depth if n > 0]
    most = max((k for k, _ in mix), default=0)
    if most <= 0 or tokens_per_cycle <= 1.0:
        return 0.0
    if tokens_per_cycle >= _mix_tokens_per_cycle(1.0, mix):
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(_ALPHA_BISECTION_STEPS):
        middle = (low + high) / 2
        if _mix_tokens_per_cycle(middle, mix) < tokens_per_cycle:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def expected_speedup_for_mix(alpha: float, mix: DepthMix, cost_ratio: float) -> float:
    """Expected tokens per cycle over expected cost per cycle, for cycles of several depths."""
    cycles = sum(n for _, n in mix)
    if not cycles:
        return 1.0
    cost = sum(n * (k * cost_ratio + 1.0) for k, n in mix) / cycles
    return _mix_tokens_per_cycle(alpha, mix) / cost


def _mix_tokens_per_cycle(alpha: float, mix: DepthMix) -> float:
    cycles = sum(n for _, n in mix)
    return sum(n * expected_tokens_per_cycle(alpha, k) for k, n in mix) / cycles


@dataclass(frozen=True)
class DecodeStats:
    """Statistics of one request (or of the request so far, when streamed)."""

    mode: str
    depth: int
    prompt_tokens: int
    generated_tokens: int
    cycles: int
    drafted_by_depth: tuple[int, ...]
    accepted_by_depth: tuple[int, ...]
    prefill_seconds: float
    ttft_seconds: float
    elapsed_seconds: float
    draft_seconds: float
    draft_steps: int
    verify_seconds: float
    verify_calls: int
    adaptive: bool = False
    """The depth was chosen before each cycle (``depth`` is then the most it could draft)."""
    decode_clock_seconds: float = 0.0
    """Decode time on the backend's cycle clock (:attr:`DecodeBackend.cycle_clock`): on a
    one-thread CPU backend the decoding thread's CPU time, which other processes' load on the
    machine does not inflate; elsewhere the same as :attr:`decode_seconds`."""
    prompt_reused_tokens: int = 0
    """Prompt tokens whose state was kept from an earlier request (not computed again)."""
    confidence_stops: int = 0
    """Cycles whose draft ended before the depth at a token the head was unsure of."""
    model_seconds: float = 0.0
    """Decode time spent inside the model's forward passes (``llama_decode``); 0 where the
    backend does not measure it (:attr:`DecodeBackend.compute_seconds`)."""

    @property
    def host_seconds_per_token(self) -> float | None:
        """Decode time outside the model's forward passes, per generated token (None when the
        backend does not measure its forward passes)."""
        if self.model_seconds <= 0 or not self.generated_tokens:
            return None
        return max(self.decode_seconds - self.model_seconds, 0.0) / self.generated_tokens

    @property
    def model_seconds_per_token(self) -> float | None:
        """Time inside the model's forward passes per generated token (None: not measured)."""
        if self.model_seconds <= 0 or not self.generated_tokens:
            return None
        return self.model_seconds / self.generated_tokens

    auto_plain_rate: float = 0.0
    """An adaptive depth's estimate of plain decoding's tokens per second here (0: none)."""
    auto_depth_rates: tuple[float, ...] = ()
    """An adaptive depth's expected tokens per second drafting 0..K per cycle (0: not timed)."""
    auto_kept_through: tuple[float, ...] = ()
    """An adaptive depth's estimated share of cycles whose drafts are kept through depth 1..K."""
    prompt_images_encoded: int = 0
    """Images of the prompt run through the vision encoder (one kept from an earlier request
    with the prefix is not)."""

    @property
    def acceptance_by_depth(self) -> tuple[float, ...]:
        return tuple(
            accepted / drafted if drafted else 0.0
            for accepted, drafted in zip(self.accepted_by_depth, self.drafted_by_depth, strict=True)
        )

    @property
    def mean_accepted_length(self) -> float:
        return sum(self.accepted_by_depth) / self.cycles if self.cycles else 0.0

    @property
    def mean_draft_depth(self) -> float:
        """Drafts per cycle: the depth, or its average where the depth adapts per cycle."""
        return sum(self.drafted_by_depth) / self.cycles if self.cycles else 0.0

    @property
    def tokens_per_cycle(self) -> float:
        return self.mean_accepted_length + 1.0 if self.cycles else 0.0

    @property
    def decode_seconds(self) -> float:
        return max(self.elapsed_seconds - self.prefill_seconds, 0.0)

    @property
    def decode_tokens_per_second(self) -> float:
        seconds = self.decode_seconds
        return self.generated_tokens / seconds if seconds > 0 else 0.0

    @property
    def decode_tokens_per_clock_second(self) -> float:
        """Generated tokens per second of :attr:`decode_clock_seconds`."""
        seconds = self.decode_clock_seconds
        return self.generated_tokens / seconds if seconds > 0 else 0.0

    @property
    def prompt_computed_tokens(self) -> int:
        """Prompt tokens the prefill ran through the model."""
        return self.prompt_tokens - self.prompt_reused_tokens

    @property
    def prefill_tokens_per_second(self) -> float:
        """Computed prompt tokens per second of prefill (reused tokens cost nothing)."""
        computed = self.prompt_computed_tokens
        return computed / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def draft_verify_cost_ratio(self) -> float:
        """c: seconds per draft step over seconds per verify call (0 when not measured)."""
        if not self.draft_steps or not self.verify_calls or self.verify_seconds <= 0:
            return 0.0
        return (self.draft_seconds / self.draft_steps) / (self.verify_seconds / self.verify_calls)

    @property
    def depth_mix(self) -> tuple[tuple[int, int], ...]:
        """``(depth, cycles)``: how many cycles drafted exactly that many tokens (a cycle that
        drafts k tokens counts in ``drafted_by_depth[0..k-1]``, so the differences give it)."""
        drafted = (self.cycles, *self.drafted_by_depth, 0)
        return tuple(
            (depth, drafted[depth] - drafted[depth + 1])
            for depth in range(len(drafted) - 1)
            if drafted[depth] > drafted[depth + 1]
        )

    @property
    def alpha(self) -> float:
        return alpha_for_tokens_per_cycle(self.tokens_per_cycle, self.depth_mix)

    @property
    def expected_speedup(self) -> float:
        if not self.cycles:
            return 1.0
        return expected_speedup_for_mix(self.alpha, self.depth_mix, self.draft_verify_cost_ratio)

    def to_dict(self) -> dict[str, Any]:
        """Every recorded and derived figure, JSON-serialisable."""
        data = asdict(self)
        for name in TUPLE_FIELDS:
            data[name] = list(getattr(self, name))
        data.update(
            acceptance_by_depth=list(self.acceptance_by_depth),
            mean_accepted_length=self.mean_accepted_length,
            mean_draft_depth=self.mean_draft_depth,
            tokens_per_cycle=self.tokens_per_cycle,
            decode_seconds=self.decode_seconds,
            decode_tokens_per_second=self.decode_tokens_per_second,
            decode_tokens_per_clock_second=self.decode_tokens_per_clock_second,
            prefill_tokens_per_second=self.prefill_tokens_per_second,
            prompt_computed_tokens=self.prompt_computed_tokens,
            draft_verify_cost_ratio=self.draft_verify_cost_ratio,
            host_seconds_per_token=self.host_seconds_per_token,
            model_seconds_per_token=self.model_seconds_per_token,
            alpha=self.alpha,
            expected_speedup=self.expected_speedup,
        )
        return data


TUPLE_FIELDS = ("drafted_by_depth", "accepted_by_depth", "auto_depth_rates", "auto_kept_through")
"""The fields that are tuples (lists in JSON)."""


def combined_stats(requests: Sequence[DecodeStats]) -> DecodeStats:
    """Several requests of one mode and depth as one: counts and times add up, so every derived
    figure (acceptance, tokens per cycle, c, tok/s …) is the pooled one."""
    first = requests[0]

    def total(name: str) -> Any:
        return sum(getattr(stats, name) for stats in requests)

    return DecodeStats(
        mode=first.mode,
        depth=first.depth,
        prompt_tokens=total("prompt_tokens"),
        generated_tokens=total("generated_tokens"),
        cycles=total("cycles"),
        drafted_by_depth=tuple(map(sum, zip(*(s.drafted_by_depth for s in requests), strict=True))),
        accepted_by_depth=tuple(
            map(sum, zip(*(s.accepted_by_depth for s in requests), strict=True))
        ),
        prefill_seconds=total("prefill_seconds"),
        ttft_seconds=total("ttft_seconds"),
        elapsed_seconds=total("elapsed_seconds"),
        draft_seconds=total("draft_seconds"),
        draft_steps=total("draft_steps"),
        verify_seconds=total("verify_seconds"),
        verify_calls=total("verify_calls"),
        adaptive=first.adaptive,
        decode_clock_seconds=total("decode_clock_seconds"),
        prompt_reused_tokens=total("prompt_reused_tokens"),
        confidence_stops=total("confidence_stops"),
        model_seconds=total("model_seconds"),
        prompt_images_encoded=total("prompt_images_encoded"),
    )


@dataclass
class StatsRecorder:
    """Mutable counters the generation loop updates; :meth:`snapshot` freezes them."""

    mode: str
    depth: int
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cycles: int = 0
    drafted_by_depth: list[int] = field(default_factory=list)
    accepted_by_depth: list[int] = field(default_factory=list)
    prefill_seconds: float = 0.0
    ttft_seconds: float = 0.0
    draft_seconds: float = 0.0
    draft_steps: int = 0
    verify_seconds: float = 0.0
    verify_calls: int = 0
    adaptive: bool = False
    prompt_reused_tokens: int = 0
    confidence_stops: int = 0
    auto_plain_rate: float = 0.0
    auto_depth_rates: tuple[float, ...] = ()
    auto_kept_through: tuple[float, ...] = ()
    prompt_images_encoded: int = 0
    clock: Callable[[], float] = time.perf_counter
    """The backend's cycle clock; decode time is also kept on it (``decode_clock_seconds``)."""
    compute_seconds: Callable[[], float] = lambda: 0.0
    """The backend's running total of time inside the model's forward passes."""
    started_at: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.drafted_by_depth = [0] * self.depth
        self.accepted_by_depth = [0] * self.depth
        self._clock_started_at = self.clock()
        self._prefill_clock_seconds = 0.0
        self._compute_at_prefill = self.compute_seconds()

    def prefill_done(self) -> None:
        """The prompt is in: decode time starts now (on every clock)."""
        self.prefill_seconds = time.perf_counter() - self.started_at
        self._prefill_clock_seconds = self.clock() - self._clock_started_at
        self._compute_at_prefill = self.compute_seconds()

    def record_cycle(self, drafted: int, accepted: int) -> None:
        self.cycles += 1
        for depth in range(drafted):
            self.drafted_by_depth[depth] += 1
        for depth in range(accepted):
            self.accepted_by_depth[depth] += 1

    def snapshot(self) -> DecodeStats:
        return DecodeStats(
            mode=self.mode,
            depth=self.depth,
            prompt_tokens=self.prompt_tokens,
            generated_tokens=self.generated_tokens,
            cycles=self.cycles,
            drafted_by_depth=tuple(self.drafted_by_depth),
            accepted_by_depth=tuple(self.accepted_by_depth),
            prefill_seconds=self.prefill_seconds,
            ttft_seconds=self.ttft_seconds,
            elapsed_seconds=time.perf_counter() - self.started_at,
            draft_seconds=self.draft_seconds,
            draft_steps=self.draft_steps,
            verify_seconds=self.verify_seconds,
            verify_calls=self.verify_calls,
            adaptive=self.adaptive,
            decode_clock_seconds=max(
                self.clock() - self._clock_started_at - self._prefill_clock_seconds, 0.0
            ),
            prompt_reused_tokens=self.prompt_reused_tokens,
            confidence_stops=self.confidence_stops,
            model_seconds=self.compute_seconds() - self._compute_at_prefill,
            auto_plain_rate=self.auto_plain_rate,
            auto_depth_rates=self.auto_depth_rates,
            auto_kept_through=self.auto_kept_through,
            prompt_images_encoded=self.prompt_images_encoded,
        )

    def cost_ratio(self) -> float:
        """c so far: seconds per draft step over seconds per verify call (0 when unmeasured)."""
        if not self.draft_steps or not self.verify_calls or self.verify_seconds <= 0:
            return 0.0
        return (self.draft_seconds / self.draft_steps) / (self.verify_seconds / self.verify_calls)
