"""``get`` on a vision GGUF repo (the vision demo published on the local hub beside two decoy
projectors): the quantisation comes with exactly one projector, the smallest lossless one unless
another is asked for, it lands beside the model, and llama.cpp runs the pair; the command says
where the projector is. Search names the projector get would fetch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import llama_cpp
import pytest

from app.engine.hub.get import GetJob, plan_get
from app.engine.hub.search import HEAD_INSIDE, describe_repo_id
from app.engine.jobs import JobContext
from app.engine.library.projectors import projector_beside
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.images import VisionProjector
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL, DEMO_VISION_PROJECTOR
from app.engine.settings import app_dirs
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import card
from tests.store.isolation import IsolatedHome, isolate

ROOT = Path(__file__).resolve().parents[2]
REPO = "visionfolk/Demo-Vision-GGUF"
TRUNK = "Demo-Vision-Q8_0.gguf"
F16 = "mmproj-Demo-Vision-F16.gguf"
F32 = "mmproj-Demo-Vision-F32.gguf"
Q8 = "mmproj-Demo-Vision-Q8_0.gguf"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> IsolatedHome:
    return isolate(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture
def hub(local_hub: LocalHub) -> LocalHub:
    projector = DEMO_VISION_PROJECTOR.read_bytes()
    local_hub.seed_files(
        REPO,
        {
            "README.md": card("acme/Demo-Vision"),
            TRUNK: DEMO_VISION_MODEL,
            F16: DEMO_VISION_PROJECTOR,
            F32: projector + b"\0" * len(projector),  # decoys: only their names and sizes count
            Q8: projector[: len(projector) // 2],
        },
    )
    return local_hub


def get(hub: LocalHub, home: IsolatedHome, projector: str = ""):
    plan = plan_get(
        REPO,
        "",
        endpoint=hub.endpoint,
        token=None,
        sidecars={},
        memory_bytes=None,
        projector=projector,
    )
    job = GetJob(plan, hub.endpoint, home.hub_cache, app_dirs().grafted_models)
    return plan, job(JobContext(emit=lambda _event: None))


def test_search_names_the_projector_get_fetches(hub: LocalHub) -> None:
    hit = describe_repo_id(REPO, endpoint=hub.endpoint, token=None, sidecars={}, memory_bytes=None)
    assert hit.projectors == (F16, F32, Q8) and hit.projector == F16
    assert [(q.label, q.mtp) for q in hit.quantisations] == [("Q8_0", HEAD_INSIDE)]


def test_get_fetches_the_model_and_the_smallest_lossless_projector_which_llama_cpp_runs(
    hub: LocalHub, home: IsolatedHome
) -> None:
    hub.traffic.reset()
    plan, result = get(hub, home)
    assert (plan.quant, plan.way, plan.projector) == ("Q8_0", HEAD_INSIDE, F16)
    assert {path for (_, path) in hub.traffic.bytes_served_per_file()} == {TRUNK, F16}
    assert result.projector == result.ready_path.parent / F16
    assert result.projector.read_bytes() == DEMO_VISION_PROJECTOR.read_bytes()
    assert projector_beside(result.ready_path) == result.projector
    assert f"its vision projector {F16} is in" in result.note
    llama_cpp_log.install()  # quiet, as the worker keeps it
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.load_mtp = True
    model = llama_cpp.llama_model_load_from_file(str(result.ready_path).encode(), params)
    try:
        with VisionProjector(result.projector, model, threads=1, use_gpu=False) as loaded:
            assert loaded.uses_mrope
    finally:
        llama_cpp.llama_model_free(model)


@pytest.mark.slow
def test_the_command_fetches_the_projector_asked_for_or_none(
    hub: LocalHub, home: IsolatedHome
) -> None:
    env = {
        **os.environ,
        "MTP_STUDIO_HOME": str(home.root / "mtp-studio"),
        "HF_HUB_CACHE": str(home.hub_cache),
        "PYTHONPATH": str(ROOT),
    }

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "app", "get", REPO, "--json", *extra]
        return subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    hub.traffic.reset()
    asked = run("--projector", "q8_0")
    assert asked.returncode == 0, asked.stderr
    summary = json.loads(asked.stdout.strip().splitlines()[-1])
    assert Path(summary["projector"]).name == Q8
    assert {path for (_, path) in hub.traffic.bytes_served_per_file()} == {TRUNK, Q8}
    hub.traffic.reset()
    without = run("--projector", "none")
    assert without.returncode == 0, without.stderr
    assert json.loads(without.stdout.strip().splitlines()[-1])["projector"] is None
    missing = run("--projector", "Q4_0")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"mtp-studio: error: {REPO} has no projector 'Q4_0'; it has {F16}, {F32}, {Q8}"
    )
