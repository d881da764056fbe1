"""The decode benchmark: plain decoding vs MTP (LC) vs MTP (match), measured in one run.

Speed claims are only meaningful side by side on the same prompts, machine and moment, so every
mode runs over the same fixed prompt set, interleaved prompt by prompt (a background load then
hits all modes alike), after one warm-up request. Per mode it aggregates the worker's
:class:`DecodeStats` and derives: decode tok/s, TTFT, acceptance by depth, mean accepted length,
the measured draft/verify cost ratio c, the speedup over plain decoding, and Leviathan's expected
speedup for the measured α and c. Leviathan's formula assumes a verify call costs what one
plain step costs; where it does not (a compute-bound CPU), the "parts" speedup — tokens per
cycle × plain step time / (K × draft step + verify call), all measured — shows what the model's
own costs allow, and the loop overhead is the measured speedup's shortfall from it. A greedy
pass first checks that MTP output is identical to plain decoding at every depth.

The "default" row is what a user gets without flags (:data:`DEFAULT_MTP_DEPTH`), checked against the
better of plain decoding and the best fixed depth. Optionally llama.cpp's own MTP loop
(:mod:`~app.engine.runtime.bench.llama_server`) gets every prompt right after ours, and its figures
are reported too. With ``penalties`` plain decoding and the deepest LC depth run once more with the
penalties and bias a chat client typically sends (:data:`PENALTIES`), on the same prompts in the
same run, so their cost is read side by side; the greedy check covers them too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.bench.interval import Interval, to_best_interval
from app.engine.runtime.bench.llama_server import LlamaServerPool, ServerFigures
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.core.stats import DecodeStats, combined_stats
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH
from app.engine.runtime.speculative.draft_health import DRAFTING_STOPPED

PROMPTS: tuple[str, ...] = (
    "Return the number of lines in a text file.",
    "Return True if the string is a palindrome, ignoring case.",
    "Split a path into its directory and file name.",
    "Compute the greatest common divisor of two integers.",
    "Read a JSON file and return the parsed object.",
    "Return a sorted list of the unique words in a sentence.",
)
SPEEDUP_TO_EXPECTED_TARGET = 0.9
LOOP_OVERHEAD_TARGET = 0.1
DEFAULT_TO_BEST_TARGET = 0.98
GREEDY_CHECK_TOKENS = 64
ADAPTIVE_MODES = ("default", "auto", "auto-unsure")
PENALTIES = {
    "presence_penalty": 0.5,
    "frequency_penalty": 0.5,
    "repetition_penalty": 1.1,
    "logit_bias": tuple((token, -1.0 if token % 2 else 1.0) for token in range(100, 108)),
}
"""What a chat front end with penalties on sends, and a small bias (8 ids)."""
PENALISED_MODES = ("ar-penalties", "lc-penalties")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModeFigures:
    """Aggregated figures of one decoding mode over every prompt and repeat."""

    label: str
    mode: str
    depth: int
    adaptive: bool
    requests: int
    generated_tokens: int
    decode_seconds: float
    mean_ttft_seconds: float
    acceptance_by_depth: tuple[float, ...]
    mean_accepted_length: float
    mean_draft_depth: float
    tokens_per_cycle: float
    cost_ratio: float
    verify_seconds_per_call: float
    verify_to_step: float
    alpha: float
    expected_speedup: float
    parts_speedup: float
    speedup: float
    decode_clock_seconds: float = 0.0
    clock_speedup: float = 0.0
    """The speedup on the backend's cycle clock (the decoding thread's CPU time on a one-thread
    CPU backend): what the speedup is without other processes' load."""
    confidence_stops: int = 0
    """Cycles whose draft ended early at a token the head was unsure of."""
    stops_unsure: bool = False
    model_seconds: float = 0.0
    """Decode time inside the model's forward passes (0: the backend does not measure it)."""

    @property
    def host_seconds_per_token(self) -> float:
        """Decode time outside the model's forward passes, per token: the loop's own cost."""
        if not self.generated_tokens:
            return 0.0
        return max(self.decode_seconds - self.model_seconds, 0.0) / self.generated_tokens

    @property
    def model_seconds_per_token(self) -> float:
        return self.model_seconds / self.generated_tokens if self.generated_tokens else 0.0

    @property
    def variable_depth(self) -> bool:
        """The drafts per cycle vary (adaptive depth, or drafts stopping where the head is
        unsure): Leviathan's figures, which assume one depth, do not apply."""
        return self.adaptive or self.stops_unsure

    @property
    def decode_tokens_per_second(self) -> float:
        return self.generated_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    @property
    def clock_tokens_per_second(self) -> float:
        seconds = self.decode_clock_seconds
        return self.generated_tokens / seconds if seconds > 0 else 0.0

    @property
    def speedup_to_expected(self) -> float:
        return self.speedup / self.expected_speedup if self.expected_speedup > 0 else 0.0

    @property
    def loop_overhead(self) -> float:
        """Share of a cycle's time spent outside its draft and verify calls."""
        return 1.0 - self.speedup / self.parts_speedup if self.parts_speedup > 0 else 0.0

    @property
    def expected_ceiling(self) -> float:
        """The highest speedup / expected this machine allows: plain step / verify call.

        speedup / expected = (plain step / verify call) × (1 − loop overhead) exactly, since α is
        derived from the measured tokens per cycle; Leviathan's formula takes the first factor
        as 1, which holds where decoding is memory-bound (a GPU, Apple silicon, a large model)
        and not where a verify call's extra rows cost compute (a small model on a CPU).
        """
        return 1.0 / self.verify_to_step if self.verify_to_step > 0 else 0.0


@dataclass(frozen=True)
class DecodeBenchmark:
    model: str
    backend: str
    temperature: float
    max_tokens: int
    prompts: int
    repeats: int
    greedy_identical: dict[str, bool]
    ar_seconds_per_token: float
    rows: tuple[ModeFigures, ...]
    llama_server_rows: tuple[ServerFigures, ...] = ()
    to_best_intervals: dict[str, Interval] = field(default_factory=dict)
    """Per adaptive mode (:data:`ADAPTIVE_MODES`): the 90 % paired-bootstrap interval of
    :meth:`to_best` in wall time (:mod:`~app.engine.runtime.bench.interval`)."""
    drafts_stopped: str | None = None
    """Why drafting was stopped on this backend
    (:mod:`~app.engine.runtime.speculative.draft_health`: its drafts were found garbage), or
    None: the MTP rows then ran as plain decoding."""

    def row(self, mode: str, depth: int) -> ModeFigures:
        return next(r for r in self.rows if r.mode == mode and r.depth == depth)

    def only(self, mode: str) -> ModeFigures:
        """The row of a mode that has one: "ar", "lc-unsure" or one of :data:`ADAPTIVE_MODES`."""
        return next(r for r in self.rows if r.mode == mode)

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(sorted({r.depth for r in self.rows if r.mode in ("lc", "match")}))

    @property
    def best_depth(self) -> int:
        return max(self.depths, key=lambda depth: self.row("lc", depth).speedup)

    @property
    def checks(self) -> dict[str, bool]:
        best = self.row("lc", self.best_depth)
        checks = {"greedy MTP identical to plain decoding": all(self.greedy_identical.values())}
        checks["drafts kept: the backend computes the MTP head (draft health)"] = (
            self.drafts_stopped is None
        )
        for depth in self.depths:
            checks[f"LC accepts ≥ match at depth {depth}"] = (
                self.row("lc", depth).mean_accepted_length
                >= self.row("match", depth).mean_accepted_length
            )
        checks[f"speedup ≥ {SPEEDUP_TO_EXPECTED_TARGET} × Leviathan expected at best depth"] = (
            best.speedup_to_expected >= SPEEDUP_TO_EXPECTED_TARGET
        )
        checks[f"loop overhead ≤ {LOOP_OVERHEAD_TARGET:.0%} at best depth"] = (
            best.loop_overhead <= LOOP_OVERHEAD_TARGET
        )
        checks["speedup > 1.0× at best depth"] = best.speedup > 1.0
        for mode in ("default", "auto"):
            name = f"{mode} ≥ {DEFAULT_TO_BEST_TARGET} × max(plain, best fixed depth)"
            checks[name] = self.to_best(mode) >= DEFAULT_TO_BEST_TARGET
        return checks

    def to_best(self, mode: str, *, clock: bool = False) -> float:
        """A mode's decode speed / max(plain, best fixed depth), in wall time or (``clock``)
        on the backend's cycle clock."""
        if clock:
            best = max(self.only("ar").clock_speedup, *(r.clock_speedup for r in self._fixed))
            return self.only(mode).clock_speedup / best if best > 0 else 0.0
        best = max(1.0, *(r.speedup for r in self._fixed))
        return self.only(mode).speedup / best

    def penalty_cost(self) -> list[tuple[ModeFigures, ModeFigures]]:
        """(without, with) :data:`PENALTIES` for plain decoding and the deepest LC depth; empty
        when the run had no penalised modes."""
        if not any(row.mode in PENALISED_MODES for row in self.rows):
            return []
        deepest = max(self.depths)
        return [
            (self.only("ar"), self.only("ar-penalties")),
            (self.row("lc", deepest), self.only("lc-penalties")),
        ]

    @property
    def _fixed(self) -> tuple[ModeFigures, ...]:
        return tuple(self.row("lc", depth) for depth in self.depths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "backend": self.backend,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "prompts": self.prompts,
            "repeats": self.repeats,
            "greedy_identical": self.greedy_identical,
            "draft_health": self.drafts_stopped,
            "ar_seconds_per_token": self.ar_seconds_per_token,
            "best_depth": self.best_depth,
            "checks": self.checks,
            "to_best": {
                mode: {
                    "wall": self.to_best(mode),
                    "clock": self.to_best(mode, clock=True),
                    "wall_interval_90": (
                        [self.to_best_intervals[mode].low, self.to_best_intervals[mode].high]
                        if mode in self.to_best_intervals
                        else None
                    ),
                }
                for mode in ADAPTIVE_MODES
            },
            "modes": [
                {
                    **{k: v for k, v in row.__dict__.items() if k != "acceptance_by_depth"},
                    "acceptance_by_depth": list(row.acceptance_by_depth),
                    "decode_tokens_per_second": row.decode_tokens_per_second,
                    "clock_tokens_per_second": row.clock_tokens_per_second,
                    "speedup_to_expected": row.speedup_to_expected,
                    "loop_overhead": row.loop_overhead,
                    "expected_ceiling": row.expected_ceiling,
                    "host_seconds_per_token": row.host_seconds_per_token,
                    "model_seconds_per_token": row.model_seconds_per_token,
                }
                for row in self.rows
            ],
            "llama_server": [
                {
                    **row.__dict__,
                    "decode_tokens_per_second": row.decode_tokens_per_second,
                    "acceptance": row.acceptance,
                }
                for row in self.llama_server_rows
            ],
        }


def _figures(
    mode: _Mode, requests: Sequence[DecodeStats], ar_rate: float, ar_clock_rate: float
) -> ModeFigures:
    """One table row from a mode's requests, pooled; ``ar_rate`` is plain decoding's tok/s,
    ``ar_clock_rate`` the same on the backend's cycle clock."""
    stats = combined_stats(requests)
    depth = stats.depth
    verify_per_call = stats.verify_seconds / stats.verify_calls if stats.verify_calls else 0.0
    draft_per_step = stats.draft_seconds / stats.draft_steps if stats.draft_steps else 0.0
    # Leviathan's figures assume one depth for every cycle: not defined for "auto" or where
    # drafts stop early.
    fixed = not mode.adaptive and not mode.stop_unsure
    # Drafts per cycle as drafted (a reply's last cycles may draft fewer than the depth), the
    # same mix the expected speedup is computed from.
    cycle_parts = stats.mean_draft_depth * draft_per_step + verify_per_call if fixed else 0.0
    return ModeFigures(
        label=mode.label,
        mode=mode.mode,
        depth=depth,
        adaptive=mode.adaptive,
        requests=len(requests),
        generated_tokens=stats.generated_tokens,
        decode_seconds=stats.decode_seconds,
        mean_ttft_seconds=stats.ttft_seconds / len(requests),
        acceptance_by_depth=stats.acceptance_by_depth,
        mean_accepted_length=stats.mean_accepted_length,
        mean_draft_depth=stats.mean_draft_depth,
        tokens_per_cycle=stats.tokens_per_cycle,
        cost_ratio=stats.draft_verify_cost_ratio,
        verify_seconds_per_call=verify_per_call,
        verify_to_step=verify_per_call * ar_rate,
        alpha=stats.alpha if fixed else 0.0,
        expected_speedup=stats.expected_speedup if fixed else 0.0,
        parts_speedup=(
            stats.tokens_per_cycle / (ar_rate * cycle_parts) if depth and cycle_parts > 0 else 1.0
        ),
        speedup=stats.decode_tokens_per_second / ar_rate if ar_rate > 0 else 0.0,
        decode_clock_seconds=stats.decode_clock_seconds,
        confidence_stops=stats.confidence_stops,
        stops_unsure=mode.stop_unsure,
        model_seconds=stats.model_seconds,
        clock_speedup=(
            stats.decode_tokens_per_clock_second / ar_clock_rate if ar_clock_rate > 0 else 0.0
        ),
    )


@dataclass(frozen=True)
class _Mode:
    label: str
    mode: str  # "ar", "lc", "match", "auto" (LC, adaptive depth 0..depth), "default",
    # "lc-unsure" / "auto-unsure" (drafts end early where the head is unsure)
    depth: int
    accept: AcceptMode
    adaptive: bool = False
    stop_unsure: bool = False
    penalised: bool = False

    def request(self, prompt: str, sampler: SamplerSettings, tokens: int) -> GenerationRequest:
        return GenerationRequest(
            messages=(ChatMessage("user", prompt),),
            max_tokens=tokens,
            sampler=replace(sampler, **PENALTIES) if self.penalised else sampler,
            mtp_depth=self.depth,
            accept=self.accept,
            adaptive_depth=self.adaptive,
            stop_unsure_drafts=self.stop_unsure,
        )


PLAIN = _Mode("plain (AR)", "ar", 0, AcceptMode.MATCH)
PLAIN_PENALISED = _Mode("plain, penalties", "ar-penalties", 0, AcceptMode.MATCH, penalised=True)
AUTO_MODE = _Mode("MTP LC auto", "auto", AUTO_MAX_DEPTH, AcceptMode.LEVIATHAN_CHEN, adaptive=True)
AUTO_UNSURE = _Mode(
    "auto, unsure stop",
    "auto-unsure",
    AUTO_MAX_DEPTH,
    AcceptMode.LEVIATHAN_CHEN,
    adaptive=True,
    stop_unsure=True,
)
DEFAULT = _Mode(
    "default (no flags)",
    "default",
    AUTO_MAX_DEPTH if DEFAULT_MTP_DEPTH == AUTO else int(DEFAULT_MTP_DEPTH),
    AcceptMode.LEVIATHAN_CHEN,
    adaptive=DEFAULT_MTP_DEPTH == AUTO,
)


def _greedy_check(
    client: RuntimeClient, prompts: Sequence[str], depths: Sequence[int], penalties: bool
) -> dict[str, bool]:
    """Greedy output of every MTP depth (and of the adaptive depth) vs plain decoding; with
    ``penalties``, also the deepest depth with them vs plain decoding with them."""
    greedy = SamplerSettings(temperature=0.0)
    checks = _same_greedy(client, prompts, PLAIN, greedy)
    checked = [_Mode("", "lc", depth, AcceptMode.LEVIATHAN_CHEN) for depth in depths]
    checked += [AUTO_MODE, AUTO_UNSURE]
    identical = {
        mode.mode if mode.adaptive else str(mode.depth): all(
            client.generate(mode.request(p, greedy, GREEDY_CHECK_TOKENS)).token_ids == reference
            for p, reference in zip(prompts, checks, strict=True)
        )
        for mode in checked
    }
    if penalties:
        penalised = _Mode("", "lc", max(depths), AcceptMode.LEVIATHAN_CHEN, penalised=True)
        references = _same_greedy(client, prompts, PLAIN_PENALISED, greedy)
        identical[f"{max(depths)}, penalties"] = references == _same_greedy(
            client, prompts, penalised, greedy
        )
    return identical


def _same_greedy(
    client: RuntimeClient, prompts: Sequence[str], mode: _Mode, greedy: SamplerSettings
) -> list[tuple[int, ...]]:
    return [
        client.generate(mode.request(p, greedy, GREEDY_CHECK_TOKENS)).token_ids for p in prompts
    ]


def _modes(depths: Sequence[int], penalties: bool = False) -> list[_Mode]:
    """Plain, LC and match at each depth, LC with the unsure stop at the deepest, the adaptive
    modes and the default, in the order each prompt runs them; with ``penalties``, plain and the
    deepest LC depth again with :data:`PENALTIES`."""
    modes = [PLAIN]
    for depth in depths:
        modes.append(_Mode(f"MTP LC K={depth}", "lc", depth, AcceptMode.LEVIATHAN_CHEN))
        modes.append(_Mode(f"MTP match K={depth}", "match", depth, AcceptMode.MATCH))
    deepest = max(depths)
    unsure = _Mode(
        f"LC K={deepest}, unsure stop",
        "lc-unsure",
        deepest,
        AcceptMode.LEVIATHAN_CHEN,
        stop_unsure=True,
    )
    modes += [unsure, AUTO_MODE, AUTO_UNSURE, DEFAULT]
    if penalties:
        label = f"LC K={deepest}, penalties"
        lc = _Mode(label, "lc-penalties", deepest, AcceptMode.LEVIATHAN_CHEN, penalised=True)
        modes += [PLAIN_PENALISED, lc]
    return modes


def run_decode_benchmark(
    client: RuntimeClient,
    *,
    depths: Sequence[int],
    temperature: float,
    max_tokens: int,
    repeats: int = 1,
    prompts: Sequence[str] = PROMPTS,
    seed: int = 0,
    top_k: int = 0,
    top_p: float = 1.0,
    llama_server: LlamaServerPool | None = None,
    progress: Progress = lambda _message: None,
    penalties: bool = False,
) -> DecodeBenchmark:
    """Measure every mode on ``client``'s model; the model must have a usable MTP head.

    With ``llama_server`` each prompt also goes to its servers, right after our modes; with
    ``penalties`` plain decoding and the deepest depth run with :data:`PENALTIES` too.
    """
    info = client.load()
    if not info.mtp_available:
        raise RuntimeBackendError(
            f"bench decode compares MTP with plain decoding, but {info.mtp_unavailable_reason}"
        )
    progress("greedy check: MTP output vs plain decoding")
    greedy_identical = _greedy_check(client, prompts, depths, penalties)

    modes = _modes(depths, penalties)
    requests: dict[_Mode, list[DecodeStats]] = {mode: [] for mode in modes}
    stopped: str | None = None

    progress("warm-up")
    warm_up = _Mode("", "lc", max(depths), AcceptMode.LEVIATHAN_CHEN)

    def sampler_for(request_seed: int) -> SamplerSettings:
        return SamplerSettings(temperature=temperature, top_k=top_k, top_p=top_p, seed=request_seed)

    client.generate(warm_up.request(prompts[0], sampler_for(seed), max_tokens))
    if llama_server is not None:
        llama_server.warm_up(prompts[0], sampler_for(seed), max_tokens)
    for repeat in range(repeats):
        for index, prompt in enumerate(prompts):
            progress(f"repeat {repeat + 1}/{repeats}, prompt {index + 1}/{len(prompts)}")
            sampler = sampler_for(seed + 1000 * repeat + index)
            for mode in modes:
                result = client.generate(mode.request(prompt, sampler, max_tokens))
                requests[mode].append(result.stats)
                if result.note is not None and result.note.startswith(DRAFTING_STOPPED):
                    stopped = result.note
            if llama_server is not None:
                llama_server.run(prompt, sampler, max_tokens)

    plain = combined_stats(requests[PLAIN])
    ar_rate, ar_clock_rate = plain.decode_tokens_per_second, plain.decode_tokens_per_clock_second
    rows = tuple(_figures(mode, requests[mode], ar_rate, ar_clock_rate) for mode in modes)
    return DecodeBenchmark(
        model=str(info.path),
        backend=info.backend,
        temperature=temperature,
        max_tokens=max_tokens,
        prompts=len(prompts),
        repeats=repeats,
        greedy_identical=greedy_identical,
        ar_seconds_per_token=1.0 / ar_rate if ar_rate > 0 else 0.0,
        rows=rows,
        llama_server_rows=llama_server.figures() if llama_server is not None else (),
        to_best_intervals=_to_best_intervals(requests, modes),
        drafts_stopped=stopped,
    )


def _to_best_intervals(
    requests: dict[_Mode, list[DecodeStats]], modes: Sequence[_Mode]
) -> dict[str, Interval]:
    """The paired-bootstrap interval of each adaptive mode / max(plain, each fixed LC depth)."""

    def pairs(mode: _Mode) -> list[tuple[int, float]]:
        return [(stats.generated_tokens, stats.decode_seconds) for stats in requests[mode]]

    baselines = [pairs(mode) for mode in modes if mode.mode in ("ar", "lc")]
    return {
        mode.mode: to_best_interval(pairs(mode), baselines)
        for mode in modes
        if mode.mode in ADAPTIVE_MODES
    }
