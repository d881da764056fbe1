"""Search and ``get`` for Gemma 4, whose drafter is a model of its own (tests/localhub/gemma_repos).

Search marks "drafter available" and where from — in the repo (found by its architecture, even
named like a separate head file), an ``MTP/`` folder, the catalog, or a ``<base>-assistant`` repo
on the Hub — lists no repo that holds only a drafter, and says when a drafter does not fit.
``get REPO --quant Q`` downloads one quantisation of the trunk and one of its drafter, nothing
else, and chat then finds the drafter for the trunk; a drafter of another size is refused before
anything is downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.drafter.pairing import find_drafter
from app.engine.errors import DrafterError, HubError
from app.engine.hub.drafter_lookup import BY_NAME, CATALOG, IN_REPO
from app.engine.hub.get import GetJob, plan_get
from app.engine.hub.search import DRAFTER, RepoHit, SearchQuery, search_models
from app.engine.jobs import JobContext
from app.engine.settings import app_dirs
from tests.drafter.pairs import PAIRS
from tests.localhub import LocalHub
from tests.localhub.gemma_repos import (
    ASSISTANT,
    BASE,
    CATALOG_DRAFTER,
    CATALOG_TRUNK,
    COMMUNITY_DRAFTER,
    FOLDER_DRAFTER,
    MISMATCHED,
    MTP_FOLDER,
    PLAIN,
    PROJECTOR,
    PROJECTOR_BYTES,
    TRUNK_Q8,
    UNSLOTH,
    UNSLOTH_DRAFTER,
    seed_gemma_repos,
)
from tests.store.isolation import IsolatedHome, isolate

ROOT = Path(__file__).resolve().parents[2]
CATALOG_DRAFTERS = {CATALOG_TRUNK: CATALOG_DRAFTER}


@pytest.fixture
def hub(local_hub: LocalHub) -> LocalHub:
    seed_gemma_repos(local_hub)
    return local_hub


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> IsolatedHome:
    return isolate(monkeypatch, tmp_path_factory.mktemp("home"))


def search(hub: LocalHub, text: str) -> dict[str, RepoHit]:
    result = search_models(
        SearchQuery(text),
        endpoint=hub.endpoint,
        token=None,
        sidecars={},
        memory_bytes=None,
        drafters=CATALOG_DRAFTERS,
    )
    return {hit.repo_id: hit for hit in result.hits}


def test_search_says_where_each_drafter_comes_from_and_lists_no_drafter(hub: LocalHub) -> None:
    hits = search(hub, "gemma-4-Tiny")
    assert set(hits) == {BASE, UNSLOTH, MTP_FOLDER, PLAIN, MISMATCHED}  # no assistant repo
    where = {repo: (hit.drafter.source, hit.drafter.repo_id) for repo, hit in hits.items()}
    assert where == {
        BASE: (BY_NAME, ASSISTANT),
        UNSLOTH: (IN_REPO, UNSLOTH),
        MTP_FOLDER: (IN_REPO, MTP_FOLDER),
        PLAIN: (BY_NAME, COMMUNITY_DRAFTER),
        MISMATCHED: (IN_REPO, MISMATCHED),
    }
    unsloth = hits[UNSLOTH]
    assert [q.label for q in unsloth.quantisations] == ["Q8_0", "BF16"]  # the drafter is none
    assert {q.mtp for q in unsloth.quantisations} == {DRAFTER} and unsloth.mtp == DRAFTER
    assert unsloth.projectors == (PROJECTOR,)
    assert unsloth.drafter.describe() == f"drafter available in this repo ({UNSLOTH_DRAFTER})"
    assert hits[MTP_FOLDER].drafter.quantisations[0].files == (FOLDER_DRAFTER,)
    assert hits[PLAIN].drafter.describe() == (
        f"drafter available {COMMUNITY_DRAFTER} (found by name on the Hub)"
    )
    assert hits[MISMATCHED].drafter.problem == (
        f"{UNSLOTH_DRAFTER} was made for a target of hidden size 256 but {TRUNK_Q8} has 128; "
        "use the drafter made for this model size"
    )


def test_the_catalog_names_a_drafter_search_could_not_find_by_name(hub: LocalHub) -> None:
    hit = search(hub, "Tiny-Gemma")[CATALOG_TRUNK]
    assert (hit.drafter.source, hit.drafter.repo_id, hit.drafter.problem) == (
        CATALOG,
        CATALOG_DRAFTER,
        None,
    )
    assert hit.drafter.describe() == f"drafter available {CATALOG_DRAFTER} (named by the catalog)"


@pytest.mark.slow
def test_the_search_command_prints_the_drafter_line(hub: LocalHub, home: IsolatedHome) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "search", "gemma-4-Tiny-it-GGUF"],
        cwd=ROOT,
        env={**os.environ, "HF_ENDPOINT": hub.endpoint, "PYTHONPATH": str(ROOT),
             "MTP_STUDIO_HOME": str(home.root / "mtp-studio")},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"  drafter available in this repo ({UNSLOTH_DRAFTER}): " in done.stdout


def get(hub: LocalHub, home: IsolatedHome, repo: str, quant: str = "Q8_0"):
    """Plan (search reads headers), then run the job with the hub's traffic counted afresh."""
    plan = plan_get(
        repo,
        quant,
        endpoint=hub.endpoint,
        token=None,
        sidecars={},
        memory_bytes=None,
        drafters=CATALOG_DRAFTERS,
    )
    job = GetJob(plan, hub.endpoint, home.hub_cache, app_dirs().grafted_models)
    hub.traffic.reset()
    return plan, job(JobContext(emit=lambda _event: None))


def test_get_fetches_the_trunk_its_drafter_and_its_projector_and_nothing_else(
    hub: LocalHub, home: IsolatedHome
) -> None:
    plan, result = get(hub, home, UNSLOTH)
    assert (plan.way, plan.files, plan.drafter_files) == (DRAFTER, (TRUNK_Q8,), (UNSLOTH_DRAFTER,))
    assert plan.projector == PROJECTOR
    assert result.ready_path.name == TRUNK_Q8
    assert result.drafter == result.ready_path.parent / UNSLOTH_DRAFTER
    assert result.projector == result.ready_path.parent / PROJECTOR
    assert find_drafter(result.ready_path).path == result.drafter
    assert result.note == (
        f"chat drafts with {UNSLOTH_DRAFTER}, which it finds for the model; its vision projector "
        f"{PROJECTOR} is in {result.ready_path.parent}"
    )
    assert hub.traffic.bytes_served_per_file() == {
        (UNSLOTH, path): size
        for path, size in {
            TRUNK_Q8: PAIRS["centroid"].target.stat().st_size,
            UNSLOTH_DRAFTER: PAIRS["centroid"].drafter.stat().st_size,
            PROJECTOR: PROJECTOR_BYTES,
        }.items()
    }
    assert result.model.downloaded_bytes == (
        PAIRS["centroid"].target.stat().st_size + PROJECTOR_BYTES
    )
    assert result.drafter_download.downloaded_bytes == PAIRS["centroid"].drafter.stat().st_size


def test_get_fetches_a_drafter_of_its_own_repo_into_the_cache_where_chat_finds_it(
    hub: LocalHub, home: IsolatedHome
) -> None:
    plan, result = get(hub, home, PLAIN)
    assert (plan.drafter_repo, plan.drafter_files) == (
        COMMUNITY_DRAFTER,
        ("gemma-4-Tiny-it-assistant-Q8_0.gguf",),
    )
    found = find_drafter(result.ready_path, [home.hub_cache], PLAIN)
    assert found.path == result.drafter
    assert "models--draftfolk--gemma-4-Tiny-it-assistant-MTP-GGUF" in str(result.drafter)


def test_get_of_a_transformers_model_fetches_googles_assistant(
    hub: LocalHub, home: IsolatedHome
) -> None:
    plan, result = get(hub, home, BASE, "")
    assert (plan.format, plan.way, plan.drafter_repo) == ("safetensors", DRAFTER, ASSISTANT)
    assert (result.drafter / "config.json").is_file()
    assert find_drafter(result.ready_path, [home.hub_cache], BASE).path == result.drafter


def test_a_drafter_of_another_size_is_refused_before_any_download(
    hub: LocalHub, home: IsolatedHome
) -> None:
    hub.traffic.reset()
    with pytest.raises(DrafterError, match="made for a target of hidden size 256"):
        get(hub, home, MISMATCHED)
    served = hub.traffic.bytes_served_per_file()
    assert all(size <= 64 * 1024 for size in served.values())  # headers only
    assert not list(home.hub_cache.rglob("*.gguf"))


def test_a_drafter_repo_cannot_be_got_as_a_model(hub: LocalHub) -> None:
    for repo in (ASSISTANT, COMMUNITY_DRAFTER):
        with pytest.raises(HubError, match="holds a drafter model"):
            plan_get(repo, endpoint=hub.endpoint, token=None, sidecars={}, memory_bytes=None)
