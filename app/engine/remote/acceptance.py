"""The draft acceptance a remote server reports, in the runtime's terms.

Those terms are defined in docs/architecture.md#statistics.

Three sources, tried in this order for each reply:

- MTP Studio's ``mtp`` object (``DecodeStats.to_dict``): drafted/accepted by depth, exact.
- llama-server's ``timings``: ``draft_n`` drafted and ``draft_n_accepted`` accepted, in total
  (no per-depth split).
- vLLM's Prometheus counters ``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``,
  ``…_num_accepted_tokens`` and ``…_num_accepted_tokens_per_pos{position}``, read before and
  after the reply. They count the whole server, so other traffic at the same time is included.

A server with none of these gets no figure, and the front end says it does not report one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from app.engine.remote.wire import count, counts

MTP_STUDIO = "MTP Studio statistics"
LLAMA_SERVER = "llama-server timings"
VLLM_METRICS = "vLLM /metrics counters (whole server, read before and after the reply)"

MAX_COUNTER = 2.0**53
MAX_POSITIONS = 64
_VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
_VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
_VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
_VLLM_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


@dataclass(frozen=True)
class RemoteAcceptance:
    """``drafted``/``accepted`` draft tokens; by depth when the server says (else empty)."""

    source: str
    drafted: int
    accepted: int
    drafted_by_depth: tuple[int, ...] = ()
    accepted_by_depth: tuple[int, ...] = ()

    @property
    def rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def rate_by_depth(self) -> tuple[float, ...]:
        return tuple(
            accepted / drafted if drafted else 0.0
            for accepted, drafted in zip(self.accepted_by_depth, self.drafted_by_depth, strict=True)
        )

    def describe(self) -> str:
        line = f"acceptance {self.rate:.0%} ({self.accepted}/{self.drafted} drafts"
        if self.drafted_by_depth:
            line += "; by depth " + " / ".join(f"{rate:.0%}" for rate in self.rate_by_depth)
        return f"{line}; {self.source})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "rate": self.rate,
            "drafted_by_depth": list(self.drafted_by_depth),
            "accepted_by_depth": list(self.accepted_by_depth),
        }


def from_mtp_extension(mtp: Any) -> RemoteAcceptance | None:
    """MTP Studio's ``mtp`` object, or None when absent, without drafts (plain decoding) or not
    counts (a server that sends ``["x"]`` or ``[1e999]`` reports nothing)."""
    if not isinstance(mtp, dict):
        return None
    drafted = counts(mtp.get("drafted_by_depth"))
    accepted = counts(mtp.get("accepted_by_depth"))
    if not drafted or accepted is None or len(drafted) != len(accepted):
        return None
    if any(taken > offered for taken, offered in zip(accepted, drafted, strict=True)):
        return None
    return RemoteAcceptance(MTP_STUDIO, sum(drafted), sum(accepted), drafted, accepted)


def from_llama_timings(timings: Any) -> RemoteAcceptance | None:
    """llama-server's ``timings`` (``draft_n`` appears only when it drafted)."""
    if not isinstance(timings, dict) or "draft_n" not in timings:
        return None
    drafted, accepted = count(timings["draft_n"]), count(timings.get("draft_n_accepted", 0))
    if drafted is None or accepted is None or accepted > drafted:
        return None
    return RemoteAcceptance(LLAMA_SERVER, drafted, accepted)


@dataclass(frozen=True)
class VllmCounters:
    """vLLM's speculative-decoding counters at one moment, summed over engines and models."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    accepted_by_position: tuple[float, ...]

    @classmethod
    def parse(cls, metrics_text: str) -> VllmCounters | None:
        """The counters in a /metrics text, or None when it has none (no spec decoding) or is
        not well-formed."""
        totals: dict[str, float] = {}
        positions: dict[int, float] = {}
        try:
            for family in text_string_to_metric_families(metrics_text):
                for sample in family.samples:
                    if not 0 <= sample.value < MAX_COUNTER:  # NaN, negative or absurd
                        return None
                    if sample.name == _VLLM_PER_POSITION:
                        position = int(sample.labels.get("position", 0))
                        if not 0 <= position < MAX_POSITIONS:
                            return None
                        positions[position] = positions.get(position, 0.0) + sample.value
                    elif sample.name in (_VLLM_DRAFTS, _VLLM_DRAFT_TOKENS, _VLLM_ACCEPTED):
                        totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
        except ValueError:  # not Prometheus text (or a position that is not a number)
            return None
        if _VLLM_DRAFT_TOKENS not in totals:
            return None
        return cls(
            drafts=totals.get(_VLLM_DRAFTS, 0.0),
            draft_tokens=totals[_VLLM_DRAFT_TOKENS],
            accepted_tokens=totals.get(_VLLM_ACCEPTED, 0.0),
            accepted_by_position=tuple(positions[p] for p in sorted(positions)),
        )

    def acceptance_since(self, before: VllmCounters) -> RemoteAcceptance | None:
        """What was drafted and accepted between ``before`` and now (None when nothing was)."""
        drafted = round(self.draft_tokens - before.draft_tokens)
        if drafted <= 0:
            return None
        drafts = round(self.drafts - before.drafts)
        by_position: tuple[int, ...] = ()
        if len(self.accepted_by_position) == len(before.accepted_by_position) and drafts > 0:
            by_position = tuple(
                round(now - then)
                for now, then in zip(
                    self.accepted_by_position, before.accepted_by_position, strict=True
                )
            )
        return RemoteAcceptance(
            VLLM_METRICS,
            drafted,
            round(self.accepted_tokens - before.accepted_tokens),
            # each draft (cycle) proposes a token at every position: each depth was drafted `drafts`
            (drafts,) * len(by_position),
            by_position,
        )
