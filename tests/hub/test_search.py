"""Search against the local hub with the real client: formats, quantisations with sizes (a
split file once), MTP readiness, fits-this-machine marks, and the ``search`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.errors import HubError
from app.engine.gguf_header import metadata_prefix
from app.engine.hub.fit import FITS, TIGHT, TOO_BIG, judge_fit
from app.engine.hub.gguf_peek import PEEK_BYTES, mtp_blocks_in
from app.engine.hub.search import (
    HEAD_INSIDE,
    NO_HEAD,
    SEPARATE_HEAD,
    SIDECAR,
    SIDECAR_ON_HUB,
    RepoHit,
    SearchQuery,
    search_models,
)
from tests.catalog.helpers import entry, write_catalog
from tests.localhub import LocalHub
from tests.localhub.shaped_repos import (
    BASE,
    GGUF_REPO,
    HEAD_INSIDE_REPO,
    MLX_REPO,
    PROJECTOR,
    SEPARATE_HEAD_REPO,
    SPLIT_BF16_BYTES,
    card,
    seed_shaped_repos,
)
from tests.store.isolation import IsolatedHome, isolate

ROOT = Path(__file__).resolve().parents[2]
SIDECAR_REPO = "acme/tiny-mtp-8b-mtp"
GIB = 1 << 30


@pytest.fixture
def hub(local_hub: LocalHub) -> LocalHub:
    seed_shaped_repos(local_hub)
    return local_hub


def search(hub: LocalHub, memory: int | None = 64 * GIB, **query: str) -> dict[str, RepoHit]:
    result = search_models(
        SearchQuery(**query),  # type: ignore[arg-type]
        endpoint=hub.endpoint,
        token=None,
        sidecars={BASE: SIDECAR_REPO},
        memory_bytes=memory,
    )
    return {hit.repo_id: hit for hit in result.hits}


def test_each_repo_lists_its_quantisations_and_how_it_gets_a_head(hub: LocalHub) -> None:
    hits = search(hub, text="Tiny-MTP-8B", format="gguf")
    assert list(hits) == [GGUF_REPO, HEAD_INSIDE_REPO, SEPARATE_HEAD_REPO]
    gguf = hits[GGUF_REPO]
    assert [(q.label, q.size, len(q.files)) for q in gguf.quantisations] == [
        ("Q4_K_M", 300_000, 1),
        ("Q8_0", 500_000, 1),
        ("BF16", SPLIT_BF16_BYTES, 3),
    ]
    assert gguf.projectors == (
        "mmproj-Tiny-MTP-8B-Q8_0.gguf",
        "mmproj-Tiny-MTP-8B-bf16.gguf",
        "mmproj-Tiny-MTP-8B-f16.gguf",
    )
    assert gguf.projector == PROJECTOR  # what get fetches: the smallest lossless
    assert (gguf.mtp, gguf.sidecar_repo, gguf.base_models) == (SIDECAR, SIDECAR_REPO, (BASE,))
    assert hits[HEAD_INSIDE_REPO].mtp == HEAD_INSIDE
    assert hits[HEAD_INSIDE_REPO].quantisations[0].label == "Q4_K_M-mtp"
    assert hits[SEPARATE_HEAD_REPO].mtp == SEPARATE_HEAD


def test_the_base_model_tree_lists_every_conversion(hub: LocalHub) -> None:
    hits = search(hub, base=BASE)
    assert set(hits) == {GGUF_REPO, HEAD_INSIDE_REPO, SEPARATE_HEAD_REPO, MLX_REPO}
    mlx = hits[MLX_REPO]
    assert mlx.format == "mlx"
    assert [(q.label, q.size, q.mtp) for q in mlx.quantisations] == [("4bit", 250_000, SIDECAR)]


def test_without_a_catalog_sidecar_a_plain_trunk_has_no_head(hub: LocalHub) -> None:
    result = search_models(
        SearchQuery(text="quantfolk/tiny"),
        endpoint=hub.endpoint,
        token=None,
        sidecars={},
        memory_bytes=None,
    )
    [hit] = result.hits
    assert hit.mtp == NO_HEAD
    assert {q.fit.verdict for q in hit.quantisations} == {"unknown"}


def search_without_catalog(hub: LocalHub, text: str) -> dict[str, RepoHit]:
    result = search_models(
        SearchQuery(text=text), endpoint=hub.endpoint, token=None, sidecars={}, memory_bytes=None
    )
    return {hit.repo_id: hit for hit in result.hits}


def test_a_sidecar_published_for_the_base_model_is_found_by_its_card(hub: LocalHub) -> None:
    hub.seed_files(
        "headsmith/tiny-heads",
        {"README.md": card(BASE, tags=("mtp-sidecar", "mtp")), "mtp.safetensors": b"x" * 100},
    )
    hit = search_without_catalog(hub, GGUF_REPO)[GGUF_REPO]
    assert (hit.mtp, hit.sidecar_repo) == (SIDECAR_ON_HUB, "headsmith/tiny-heads")
    assert [q.mtp for q in hit.quantisations] == [SIDECAR_ON_HUB] * 3


def test_a_sidecar_is_found_by_the_publish_flows_name_and_must_hold_the_head(
    hub: LocalHub,
) -> None:
    hub.seed_files("zed/Tiny-MTP-8B-mtp", {"README.md": card(None), "notes.txt": b"soon"})
    hub.seed_files("zed/Tiny-MTP-8B-mtp-old", {"mtp.safetensors": b"x" * 100})
    assert search_without_catalog(hub, GGUF_REPO)[GGUF_REPO].mtp == NO_HEAD
    hub.seed_files("acme/Tiny-MTP-8B-mtp", {"mtp.safetensors": b"x" * 100})
    hub.seed_files("zed/tiny-mtp-8b-mtp", {"mtp.safetensors": b"x" * 100})
    hit = search_without_catalog(hub, GGUF_REPO)[GGUF_REPO]
    # both hold the head; the base model's owner publishes the one chosen
    assert (hit.mtp, hit.sidecar_repo) == (SIDECAR_ON_HUB, "acme/Tiny-MTP-8B-mtp")


def test_fit_uses_the_memory_estimate_with_the_base_models_shape(hub: LocalHub) -> None:
    gguf = search(hub, text=GGUF_REPO)[GGUF_REPO]
    q4 = gguf.quantisations[0]
    # the estimate is the file plus KV cache, compute buffers and kept states, at a context
    assert q4.fit.context >= 2048 and q4.fit.estimate_bytes > q4.size + (1 << 30)
    assert judge_fit(q4.size, None, 64 * GIB).context == 0
    small = search(hub, memory=int(q4.fit.estimate_bytes / 0.8), text=GGUF_REPO)[GGUF_REPO]
    assert small.quantisations[0].fit.verdict == TIGHT
    tiny = search(hub, memory=GIB, text=GGUF_REPO)[GGUF_REPO]
    assert tiny.quantisations[0].fit.verdict == TOO_BIG
    assert gguf.quantisations[0].fit.verdict == FITS


def test_bad_queries_say_what_to_type() -> None:
    with pytest.raises(HubError, match="give a text to search for"):
        SearchQuery()
    with pytest.raises(HubError, match="format 'onnx' is unknown"):
        SearchQuery("x", format="onnx")


@pytest.mark.slow
def test_the_command_prints_json_and_times_the_search(
    hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home: IsolatedHome = isolate(monkeypatch, tmp_path / "home")
    catalog = write_catalog(
        tmp_path / "catalog.yaml",
        entry(
            "tiny-gguf",
            source_model=BASE,
            mtp_source_repo=BASE,
            mtp_sidecar_repo=SIDECAR_REPO,
            quant="Q4_K_M",
            output_name="Tiny-Q4_K_M.gguf",
        ),
    )
    env = {
        **os.environ,
        "MTP_STUDIO_HOME": str(home.root / "mtp-studio"),
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "app", "search", "tiny-mtp-8b", "--catalog", str(catalog)]
    done = subprocess.run(
        [*command, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    by_repo = {hit["repo"]: hit for hit in answer["hits"]}
    assert by_repo[GGUF_REPO]["mtp"] == SIDECAR and by_repo[BASE]["mtp"] == HEAD_INSIDE
    assert 0 < answer["seconds"] < 10
    text = subprocess.run(
        [*command, "--sort", "recent"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert text.returncode == 0, text.stderr
    assert f"MTP: {SIDECAR} ({SIDECAR_REPO})" in text.stdout
    assert "BF16" in text.stdout and "in 3 parts" in text.stdout
    assert text.stdout.strip().splitlines()[-1].startswith("5 repo(s) in ")


DEMO_GGUF = ROOT / "resources" / "models" / "demo-mtp.gguf"


def test_a_plainly_named_gguf_with_a_head_is_found_from_its_first_kilobytes(
    hub: LocalHub,
) -> None:
    hub.seed_files("headfolk/Demo-GGUF", {"README.md": b"---\n---\n", "Demo-Q8_0.gguf": DEMO_GGUF})
    hub.traffic.reset()
    [hit] = search(hub, text="headfolk").values()
    assert [(q.label, q.mtp) for q in hit.quantisations] == [("Q8_0", HEAD_INSIDE)]
    assert hub.traffic.bytes_served("headfolk/Demo-GGUF", "Demo-Q8_0.gguf") == PEEK_BYTES


def test_the_header_prefix_says_the_head_count_or_that_it_cannot_tell() -> None:
    start = DEMO_GGUF.read_bytes()[:PEEK_BYTES]
    assert mtp_blocks_in(metadata_prefix(start)) == 1
    assert mtp_blocks_in(metadata_prefix(start[:200])) is None
    assert metadata_prefix(os.urandom(4096)) == {}
