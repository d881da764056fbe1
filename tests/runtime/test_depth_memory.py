"""The adaptive depth's state kept across restarts, per model file and machine."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.engine.runtime.backends.choice import LLAMA_CPP
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.speculative.depth_memory import STORE_FILE_NAME, DepthMemory, model_identity
from app.engine.runtime.speculative.depth_policy import (
    CYCLES_PER_TRIAL,
    AdaptiveDepth,
    DepthPolicies,
)
from tests.runtime.test_depth_policy import CPU_LIKE, _drive
from tests.store.isolation import IsolatedHome

MACHINE = "llama.cpp:test-machine"


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return path


def _learned(memory: DepthMemory, model: Path, machine: str = MACHINE) -> AdaptiveDepth:
    """A policy as a session ends: it has learned CPU_LIKE's costs and saved them."""
    policies = DepthPolicies(memory)
    policy = policies.for_request(4, adaptive=True, model=model, machine=machine)
    assert isinstance(policy, AdaptiveDepth)
    _drive(policy, CPU_LIKE, cycles=200)
    policies.save()
    return policy


def test_a_new_session_starts_at_the_depth_learned_before(tmp_path: Path, model_file: Path):
    memory = DepthMemory(tmp_path / STORE_FILE_NAME)
    before = _learned(memory, model_file)

    restarted = DepthPolicies(DepthMemory(memory.path)).for_request(
        4, adaptive=True, model=model_file, machine=MACHINE
    )
    assert isinstance(restarted, AdaptiveDepth)
    assert restarted.tokens_per_second() == before.tokens_per_second()
    # No opening trials: the first cycles run at the depth that was fastest (depth 1 here).
    assert [restarted.choose(4) for _ in range(10)] == [CPU_LIKE.best()] * 10


def test_a_fresh_policy_opens_with_trials(tmp_path: Path, model_file: Path) -> None:
    policy = DepthPolicies(DepthMemory(tmp_path / STORE_FILE_NAME)).for_request(
        4, adaptive=True, model=model_file, machine=MACHINE
    )
    trials = [policy.choose(4) for _ in range(3 * CYCLES_PER_TRIAL)]
    assert trials == [1] * CYCLES_PER_TRIAL + [2] * CYCLES_PER_TRIAL + [0] * CYCLES_PER_TRIAL


@pytest.mark.parametrize("other", ["machine", "model", "max depth"])
def test_what_was_learned_stays_with_its_model_machine_and_depth(
    tmp_path: Path, model_file: Path, other: str
) -> None:
    memory = DepthMemory(tmp_path / STORE_FILE_NAME)
    _learned(memory, model_file)
    model, machine, max_depth = model_file, MACHINE, 4
    if other == "machine":
        machine = "llama.cpp:another-machine"
    elif other == "model":
        model = tmp_path / "other.gguf"
        model.write_bytes(b"GGUF another model")
    else:
        max_depth = 3
    policy = DepthPolicies(memory).for_request(
        max_depth, adaptive=True, model=model, machine=machine
    )
    assert isinstance(policy, AdaptiveDepth)
    assert policy.tokens_per_second() == [None] * (max_depth + 1)


def test_a_renamed_copy_of_the_model_keeps_its_state(tmp_path: Path, model_file: Path) -> None:
    copy = tmp_path / "renamed.gguf"
    copy.write_bytes(model_file.read_bytes())
    assert model_identity(copy) == model_identity(model_file)


@pytest.mark.parametrize(
    "content",
    ['{"version": 1, "policies": {', "[1, 2, 3]", '{"version": 99, "policies": {}}'],
    ids=["truncated", "not an object", "other version"],
)
def test_an_unusable_file_is_ignored_with_a_log_line_and_replaced(
    tmp_path: Path, model_file: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / STORE_FILE_NAME
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        policies = DepthPolicies(DepthMemory(path))
        policy = policies.for_request(4, adaptive=True, model=model_file, machine=MACHINE)
    assert isinstance(policy, AdaptiveDepth)
    assert policy.tokens_per_second() == [None] * 5
    assert any(str(path) in record.getMessage() for record in caplog.records)

    _drive(policy, CPU_LIKE, cycles=50)
    policies.save()
    saved = json.loads(path.read_text())
    assert saved["version"] == 1 and len(saved["policies"]) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_saved_state_of_the_wrong_shape_is_ignored(
    tmp_path: Path, model_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = DepthMemory(tmp_path / STORE_FILE_NAME)
    _learned(memory, model_file)
    document = json.loads(memory.path.read_text())
    for state in document["policies"].values():
        state["trials"] = state["trials"][:2]  # e.g. written for another maximum depth
        state["timed"]["1"] = ["fast"]
    memory.path.write_text(json.dumps(document))
    with caplog.at_level(logging.WARNING):
        policy = DepthPolicies(memory).for_request(
            4, adaptive=True, model=model_file, machine=MACHINE
        )
    assert isinstance(policy, AdaptiveDepth)
    assert policy.tokens_per_second() == [None] * 5
    assert "ignoring the saved adaptive depth state" in caplog.text


def test_the_worker_saves_in_the_app_data_folder_after_each_reply(
    backend: LlamaCppBackend, tiny_models: dict[str, Path], home: IsolatedHome
) -> None:
    """The inference worker saves what its adaptive depth learned once a reply is sent (the
    write is not in the reply's timings), in the app's data folder, where a restart reads it."""
    request = GenerationRequest(
        prompt="Remember me", max_tokens=40, mtp_depth=4, adaptive_depth=True
    )
    settings = LoadSettings(threads=1, context_length=1024)
    with RuntimeClient(tiny_models["mtp"], backend=LLAMA_CPP, settings=settings) as client:
        client.generate(request)
        client.generate(GenerationRequest(prompt="Plain", max_tokens=4))  # the save is done
    files = list(home.root.rglob(STORE_FILE_NAME))
    assert len(files) == 1
    entries = json.loads(files[0].read_text())["policies"]
    (key,) = entries
    assert key.startswith(model_identity(backend.info.path))
    assert backend.performance_fingerprint in key

    restarted = DepthPolicies().for_request(
        4, adaptive=True, model=backend.info.path, machine=backend.performance_fingerprint
    )
    assert isinstance(restarted, AdaptiveDepth)
    state = restarted.to_state()
    assert state.pop("winner") in (True, False)  # the restarted request's own decision
    saved = entries[key]
    assert saved.pop("winner") is None  # the first reply only ran the opening trials
    assert state == saved
