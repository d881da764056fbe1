"""A backend whose drafts are garbage stops drafting, says why, and stays stopped.

The model's MTP head is scrambled on purpose (its embedding features permuted), as a backend
that miscomputes the head would leave it: verification still keeps the output exact, so the only
symptom is the speed lost to drafts that never land. The real llama.cpp backend runs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_memory import DepthMemory, model_identity
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.draft_health import (
    ACCEPTANCE_FLOOR,
    DRAFTING_STOPPED,
    JUDGED_AFTER_CYCLES,
    DraftHealth,
)
from app.engine.runtime.speculative.generation import generate
from tests.runtime.tiny_model import write_tiny_qwen35

PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def scrambled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppBackend]:
    path = write_tiny_qwen35(
        tmp_path_factory.mktemp("scrambled") / "tiny-scrambled-head.gguf",
        perturbation=0.15,
        scrambled_head=True,
    )
    loaded = LlamaCppBackend(path, LoadSettings(threads=1, context_length=1024))
    yield loaded
    loaded.close()


def ask(backend: LlamaCppBackend, policies: DepthPolicies, depth: int) -> GenerationResult:
    request = GenerationRequest(
        prompt=PROMPT, max_tokens=160, mtp_depth=depth, sampler=SamplerSettings(temperature=0.0)
    )
    return generate(
        backend, request, emit=lambda _chunk: None, cancelled=lambda: False, depth_policies=policies
    )


def test_garbage_drafts_stop_drafting_for_that_model_and_backend(
    scrambled: LlamaCppBackend, tmp_path: Path
) -> None:
    policies = DepthPolicies(DepthMemory(tmp_path / "adaptive-depth.json"))
    plain = ask(scrambled, policies, depth=0)
    first = ask(scrambled, policies, depth=2)
    assert first.note is None  # fewer cycles than the verdict needs
    assert first.token_ids == plain.token_ids
    second = ask(scrambled, policies, depth=2)
    assert second.token_ids == plain.token_ids  # exact all along
    assert second.note is not None and second.note.startswith(
        f"{DRAFTING_STOPPED}: the MTP head's first draft was kept in "
    )
    assert f"below the {ACCEPTANCE_FLOOR:.0%} floor" in second.note
    assert f"of {JUDGED_AFTER_CYCLES} cycles" in second.note
    policies.save()

    third = ask(scrambled, policies, depth=2)
    assert (third.note, third.stats.draft_steps, third.stats.mode) == (second.note, 0, "ar")
    # A new session (the worker restarted) keeps the verdict for this model and backend.
    restarted = ask(scrambled, DepthPolicies(DepthMemory(tmp_path / "adaptive-depth.json")), 2)
    assert (restarted.note, restarted.stats.draft_steps) == (second.note, 0)
    # The same file on another backend (another build or thread count) is judged afresh.
    elsewhere = DraftHealth(tmp_path).watch(scrambled.info.path, "llama.cpp:another-build")
    assert elsewhere.reason is None


def test_a_sound_head_keeps_drafting(backend: LlamaCppBackend, tmp_path: Path) -> None:
    policies = DepthPolicies(DepthMemory(tmp_path / "adaptive-depth.json"))
    for _ in range(4):
        result = ask(backend, policies, depth=2)
        assert result.note is None and result.stats.draft_steps > 0
    verdict = policies.draft_health.watch(
        backend.info.path, backend.performance_fingerprint
    ).verdict()
    assert verdict.cycles == JUDGED_AFTER_CYCLES and verdict.reason is None
    assert verdict.acceptance > 0.3


@pytest.fixture(scope="module")
def weak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaCppBackend]:
    """A head right about one first draft in ten: above the floor, so only a comparison with
    another backend can tell it is broken here."""
    path = write_tiny_qwen35(tmp_path_factory.mktemp("weak") / "tiny-weak.gguf", perturbation=0.6)
    loaded = LlamaCppBackend(path, LoadSettings(threads=1, context_length=1024))
    yield loaded
    loaded.close()


def test_far_below_what_the_model_keeps_on_another_backend_stops_drafting(
    weak: LlamaCppBackend, tmp_path: Path
) -> None:
    memory = DepthMemory(tmp_path / "adaptive-depth.json")
    # What the adaptive depth saved for the same file on another backend: 90 % kept.
    memory.save(
        f"{model_identity(weak.info.path)}|llama.cpp:cuda-build|max3",
        {"trials": [0.0, 40.0, 30.0, 20.0], "kept": [0.0, 36.0, 24.0, 14.0], "timed": {}},
    )
    policies = DepthPolicies(memory)
    watch = policies.draft_health.watch(weak.info.path, weak.performance_fingerprint)
    while watch.verdict().cycles < JUDGED_AFTER_CYCLES:
        ask(weak, policies, depth=2)
    verdict = watch.verdict()
    assert ACCEPTANCE_FLOOR < verdict.acceptance < 0.25 * 0.9
    assert verdict.reason is not None
    assert "far below the 90% this model keeps on another backend" in verdict.reason
    # Without that figure the same acceptance is a weak head, not a broken backend.
    alone = DepthPolicies(DepthMemory(tmp_path / "alone" / "adaptive-depth.json"))
    for _ in range(4):
        assert ask(weak, alone, depth=2).note is None


@pytest.mark.slow
def test_bench_decode_flags_a_backend_whose_drafts_are_garbage(
    scrambled: LlamaCppBackend, capsys: pytest.CaptureFixture
) -> None:
    args = ["bench", "decode", "--model", str(scrambled.info.path), "--depths", "1"]
    assert main([*args, "--max-tokens", "24", "--repeats", "1", "--threads", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["draft_health"].startswith(f"{DRAFTING_STOPPED}: the MTP head's first draft")
    assert (
        report["checks"]["drafts kept: the backend computes the MTP head (draft health)"] is False
    )
    assert report["checks"]["greedy MTP identical to plain decoding"] is True
    lc = next(mode for mode in report["modes"] if mode["label"] == "MTP LC K=1")
    assert lc["mean_draft_depth"] == 0  # every timed request ran plainly


@pytest.mark.slow
def test_bench_decode_says_nothing_of_a_sound_head(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = ["bench", "decode", "--model", str(tiny_models["mtp"]), "--depths", "1"]
    assert main([*args, "--max-tokens", "24", "--repeats", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "[ok] drafts kept: the backend computes the MTP head (draft health)" in out
    assert "DRAFTS BROKEN" not in out
