"""The vLLM /metrics reader, tested on a recording because no vLLM can run on this CPU machine.

The recordings (recordings/vllm_metrics_*.txt) are /metrics texts in the exposition format vLLM v1
serves (HELP and TYPE lines, ``_total`` and ``_created`` samples, ``engine`` and ``model_name``
labels, two engines as with data parallelism), trimmed to the speculative-decoding counters plus
neighbours the reader must ignore. They were written for this test in that format, not captured
from a live vLLM; "after" is "before" plus one reply drafted with MTP at 3 tokens per cycle.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.remote.acceptance import VLLM_METRICS, VllmCounters

RECORDINGS = Path(__file__).parent / "recordings"
BEFORE = (RECORDINGS / "vllm_metrics_before.txt").read_text()
# One reply on engine 0: 40 cycles × 3 drafts = 120 drafted; 36 / 30 / 22 accepted by position.
AFTER = (RECORDINGS / "vllm_metrics_after.txt").read_text()


def test_counters_are_summed_over_engines() -> None:
    counters = VllmCounters.parse(BEFORE)
    assert counters == VllmCounters(
        drafts=9800.0,
        draft_tokens=29400.0,
        accepted_tokens=21500.0,
        accepted_by_position=(8800.0, 7200.0, 5500.0),
    )


def test_acceptance_of_one_reply_is_the_difference_before_and_after() -> None:
    before, after = VllmCounters.parse(BEFORE), VllmCounters.parse(AFTER)
    assert before is not None and after is not None
    acceptance = after.acceptance_since(before)
    assert acceptance is not None and acceptance.source == VLLM_METRICS
    assert (acceptance.drafted, acceptance.accepted) == (120, 88)
    assert acceptance.drafted_by_depth == (40, 40, 40)
    assert acceptance.accepted_by_depth == (36, 30, 22)
    assert acceptance.rate_by_depth == (0.9, 0.75, 0.55)
    assert "73%" in acceptance.describe() and "90% / 75% / 55%" in acceptance.describe()


def test_no_drafts_in_between_gives_no_figure() -> None:
    before = VllmCounters.parse(BEFORE)
    assert before is not None and before.acceptance_since(before) is None


def test_a_server_without_speculative_decoding_has_no_counters() -> None:
    plain = "\n".join(line for line in BEFORE.splitlines() if "spec_decode" not in line) + "\n"
    assert VllmCounters.parse(plain) is None
