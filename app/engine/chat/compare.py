"""Compare mode: one prompt answered with plain decoding and with MTP, same seed, side by side.

Exact speculative decoding promises two things a user can check here: at temperature 0 the MTP
output is token for token the plain output, and MTP is faster. At temperature > 0 the promise is
about the distribution, not the sample — the two runs consume random numbers differently — so a
difference there is expected and said so.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.runtime.core.request import GenerationResult


@dataclass(frozen=True)
class CompareOutcome:
    plain: GenerationResult
    mtp: GenerationResult
    greedy: bool

    @property
    def outputs_match(self) -> bool:
        return self.plain.token_ids == self.mtp.token_ids

    @property
    def first_difference(self) -> int | None:
        """Index of the first token where the outputs differ (None when they match)."""
        for index, (left, right) in enumerate(
            zip(self.plain.token_ids, self.mtp.token_ids, strict=False)
        ):
            if left != right:
                return index
        if len(self.plain.token_ids) != len(self.mtp.token_ids):
            return min(len(self.plain.token_ids), len(self.mtp.token_ids))
        return None

    @property
    def speedup(self) -> float:
        plain = self.plain.stats.decode_tokens_per_second
        return self.mtp.stats.decode_tokens_per_second / plain if plain > 0 else 0.0

    @property
    def verdict(self) -> str:
        if self.outputs_match:
            what = "identical outputs" if self.greedy else "identical outputs (same seed)"
            return (
                f"{what}: {len(self.plain.token_ids)} tokens match · MTP {self.speedup:.2f}× plain"
            )
        where = self.first_difference
        if self.greedy:
            return (
                f"outputs differ from token {where}: at temperature 0 they must match — please "
                "report this with the model file (Help → Open logs folder)"
            )
        return (
            f"outputs differ from token {where}, as expected at temperature > 0 (exactness is "
            f"about the distribution, not the sample); set temperature 0 to compare token for "
            f"token · MTP {self.speedup:.2f}× plain"
        )
