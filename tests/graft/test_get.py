"""``get`` from a repo name to an MTP-ready model, against the local hub with real files: a plain
GGUF gets the catalog sidecar grafted, a split one is joined then grafted, one with its head
inside is only downloaded, an MLX conversion is paired; the command's last line is the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.chat.model_files import describe_model
from app.engine.hub.get import GET_KIND, GRAFTED, NO_MTP, PAIRED, GetJob, GetPlan, plan_get
from app.engine.hub.search import HEAD_INSIDE, SEPARATE_HEAD
from app.engine.jobs import JobContext
from app.engine.settings import app_dirs
from app.engine.store import JobSpec, JobState, JobStore
from app.engine.store.kinds import build_job
from tests.catalog.helpers import entry, write_catalog
from tests.graft.splits import write_split
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import SEPARATE_HEAD_REPO, card, seed_shaped_repos
from tests.store.isolation import IsolatedHome

ROOT = Path(__file__).resolve().parents[2]
BASE = "acme/Demo-MTP"
SIDECAR_REPO = "acme/demo-mtp-mtp"
GGUF_REPO = "quantfolk/Demo-MTP-GGUF"
INSIDE_REPO = "mtpfolk/Demo-MTP-MTP-GGUF"
MLX_REPO = "mlx-community/Demo-MTP-4bit"
SIDECARS = {BASE: SIDECAR_REPO}


@pytest.fixture
def hub(local_hub: LocalHub, graft_files: dict[str, Path], tmp_path: Path) -> LocalHub:
    parts = write_split(graft_files["trunk_q8"], tmp_path / "Demo-MTP-Q8_0.gguf", 40)
    local_hub.seed_files(
        GGUF_REPO,
        {
            "README.md": card(BASE),
            "Demo-MTP-Q4_0.gguf": graft_files["trunk_q4"],
            **{f"Q8_0/{part.name}": part for part in parts},
        },
    )
    local_hub.seed_files(
        INSIDE_REPO, {"README.md": card(BASE), "Demo-MTP-Q8_0-mtp.gguf": graft_files["grafted_q8"]}
    )
    local_hub.seed_files(
        MLX_REPO,
        {"README.md": card(BASE, "mlx"), "config.json": b"{}", "model.safetensors": b"x" * 2000},
    )
    local_hub.seed_files(SIDECAR_REPO, {"mtp.safetensors": graft_files["sidecar_fp8"]})
    return local_hub


def get(hub: LocalHub, home: IsolatedHome, repo: str, quant: str = ""):
    plan = plan_get(
        repo, quant, endpoint=hub.endpoint, token=None, sidecars=SIDECARS, memory_bytes=None
    )
    job = GetJob(plan, hub.endpoint, home.hub_cache, app_dirs().grafted_models)
    return plan, job(JobContext(emit=lambda _event: None))


@pytest.mark.slow
def test_a_plain_gguf_gets_the_catalog_sidecar_grafted(hub: LocalHub, home: IsolatedHome) -> None:
    hub.traffic.reset()
    plan, result = get(hub, home, GGUF_REPO, "q4_0")
    assert (plan.quant, plan.way, plan.sidecar_repo) == ("Q4_0", GRAFTED, SIDECAR_REPO)
    assert result.ready_path == app_dirs().grafted_models / "Demo-MTP-Q4_0-mtp.gguf"
    assert describe_model(result.ready_path).mtp_blocks == 1
    fetched = {path for (_, path) in hub.traffic.bytes_served_per_file()}
    assert fetched == {"Demo-MTP-Q4_0.gguf", "mtp.safetensors"}


@pytest.mark.slow
def test_a_split_gguf_is_joined_then_grafted_by_the_command(
    hub: LocalHub, home: IsolatedHome, tmp_path: Path
) -> None:
    catalog = write_catalog(
        tmp_path / "catalog.yaml",
        entry(
            "demo-gguf",
            source_model=BASE,
            mtp_source_repo=BASE,
            mtp_sidecar_repo=SIDECAR_REPO,
            quant="Q8_0",
            output_name="Demo-MTP-Q8_0.gguf",
        ),
    )
    env = {
        **os.environ,
        "MTP_STUDIO_HOME": str(home.root / "mtp-studio"),
        "HF_HUB_CACHE": str(home.hub_cache),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "app", "get", GGUF_REPO, "--quant", "Q8_0", "--catalog", catalog],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    ready = Path(done.stdout.strip().splitlines()[-1])
    assert ready == app_dirs().grafted_models / "Demo-MTP-Q8_0-mtp.gguf"
    assert describe_model(ready).mtp_blocks == 1
    assert "the 3 parts were joined into one file" in done.stderr
    assert not list(ready.parent.glob(".joining-*"))
    store = JobStore(app_dirs().job_database)
    [record] = store.jobs()
    assert (record.spec.kind, record.state) == ("get", JobState.SUCCEEDED)
    store.close()


def test_a_head_inside_is_only_downloaded(hub: LocalHub, home: IsolatedHome) -> None:
    plan, result = get(hub, home, INSIDE_REPO)
    assert (plan.quant, plan.way) == ("Q8_0-mtp", HEAD_INSIDE)
    assert result.ready_path.name == "Demo-MTP-Q8_0-mtp.gguf"
    assert describe_model(result.ready_path).mtp_blocks == 1


def test_a_separate_head_file_is_grafted_into_its_trunk(
    local_hub: LocalHub, home: IsolatedHome
) -> None:
    seed_shaped_repos(local_hub)
    local_hub.traffic.reset()
    plan, result = get(local_hub, home, SEPARATE_HEAD_REPO)
    assert (plan.quant, plan.way) == ("Q8_0", SEPARATE_HEAD)  # even with a catalog sidecar
    assert result.ready_path == app_dirs().grafted_models / "Tiny-MTP-8B-Q8_0-mtp.gguf"
    assert describe_model(result.ready_path).mtp_blocks == 1
    assert result.note == "the separate head file mtp-Tiny-MTP-8B-Q8_0.gguf was grafted into a copy"
    fetched = {path for (_, path) in local_hub.traffic.bytes_served_per_file()}
    # config.json: the base model's shape, read by the plan to judge what fits
    assert fetched == {"Tiny-MTP-8B-Q8_0.gguf", "mtp-Tiny-MTP-8B-Q8_0.gguf", "config.json"}


def test_an_mlx_conversion_is_paired_with_the_sidecar(hub: LocalHub, home: IsolatedHome) -> None:
    plan, result = get(hub, home, MLX_REPO)
    assert (plan.format, plan.quant, plan.way) == ("mlx", "4bit", PAIRED)
    assert (result.ready_path / "model.safetensors").is_file()
    assert result.note.startswith("chat pairs it with the sidecar ")
    assert result.note.endswith("mtp.safetensors")


@pytest.mark.slow
def test_without_a_catalog_the_sidecar_published_on_the_hub_is_grafted(
    hub: LocalHub, home: IsolatedHome
) -> None:
    plan = plan_get(
        GGUF_REPO, "Q4_0", endpoint=hub.endpoint, token=None, sidecars={}, memory_bytes=None
    )
    # acme/demo-mtp-mtp: the publish flow's <base-slug>-mtp name for acme/Demo-MTP
    assert (plan.way, plan.sidecar_repo) == (GRAFTED, SIDECAR_REPO)
    result = GetJob(plan, hub.endpoint, home.hub_cache, app_dirs().grafted_models)(JobContext())
    assert describe_model(result.ready_path).mtp_blocks == 1


def test_without_any_sidecar_it_says_there_is_no_head(
    hub: LocalHub, graft_files: dict[str, Path]
) -> None:
    hub.seed_files(
        "plainfolk/Other-GGUF",
        {"README.md": card("acme/Other"), "Other-Q4_0.gguf": graft_files["trunk_q4"]},
    )
    plan = plan_get(
        "plainfolk/Other-GGUF", endpoint=hub.endpoint, token=None, sidecars={}, memory_bytes=None
    )
    assert plan.way == NO_MTP


def test_without_a_label_the_largest_that_fits_is_chosen(hub: LocalHub) -> None:
    roomy = plan_get(
        GGUF_REPO, endpoint=hub.endpoint, token=None, sidecars=SIDECARS, memory_bytes=64 << 30
    )
    assert roomy.quant == "Q8_0" and len(roomy.files) == 3
    unknown = plan_get(
        GGUF_REPO, endpoint=hub.endpoint, token=None, sidecars=SIDECARS, memory_bytes=None
    )
    assert unknown.quant == "Q4_0"  # nothing is known to fit: the smallest


def test_a_stored_get_job_runs_again_from_its_parameters(hub: LocalHub, home: IsolatedHome) -> None:
    plan, first = get(hub, home, GGUF_REPO, "Q4_0")
    job = GetJob(plan, hub.endpoint, home.hub_cache, app_dirs().grafted_models)
    again = build_job(JobSpec(GET_KIND, plan.title, job.to_params()))
    result = again(JobContext(emit=lambda _event: None))
    assert result.ready_path == first.ready_path
    assert result.model.downloaded_bytes == 0  # every file was verified in place, none fetched


def test_a_file_found_to_have_its_head_after_download_is_not_grafted(
    hub: LocalHub, home: IsolatedHome, graft_files: dict[str, Path]
) -> None:
    hub.seed_files("plainfolk/Demo-GGUF", {"Demo-Q8_0.gguf": graft_files["grafted_q8"]})
    # as planned when the header could not be read beforehand
    plan = GetPlan(
        "plainfolk/Demo-GGUF", "gguf", "Q8_0", ("Demo-Q8_0.gguf",), GRAFTED, SIDECAR_REPO
    )
    hub.traffic.reset()
    result = GetJob(plan, hub.endpoint, home.hub_cache, app_dirs().grafted_models)(JobContext())
    assert result.ready_path.name == "Demo-Q8_0.gguf"
    assert result.note == "the file already has its MTP head (1 block(s)); nothing grafted"
    assert {path for (_, path) in hub.traffic.bytes_served_per_file()} == {"Demo-Q8_0.gguf"}
