"""Downloads from a Hub that lists hostile names and ids: nothing lands outside the destination.

The local hub serves a small repo whose tree listing is forged for one file (``victim.txt`` or
the LFS ``weights.safetensors``): its path climbs out, is absolute, has a drive letter, a
backslash or a control character; or its git/LFS id is a path or not hex; or its size is not a
byte count. Each is tried in both layouts with the real client. Every case must: refuse the entry
with a message naming it, fetch and place the safe files, leave no partial file, write nothing
outside the destination, and end as a failure (so the CLI exits non-zero).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.download import CACHE, FOLDER, DownloadJob, DownloadRequest
from app.engine.errors import DownloadError
from app.engine.jobs import JobContext, JobEvent, LogEvent, ResultEvent
from tests.hardening.outside import tree_state, written_outside
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

REPO = "evil/repo"
ROOT = Path(__file__).resolve().parents[2]
CONFIG = b'{"model_type": "qwen3_5"}'
VICTIM = b"the server wants this file somewhere else\n"
WEIGHTS = os.urandom(20_000)

HOSTILE_PATHS = [
    "../climb.txt",
    "../../climb.txt",
    "sub/../../climb.txt",
    "{sandbox}/absolute-climb.txt",
    "C:/climb.txt",
    "sub/C:climb.txt",
    "..\\climb.txt",
    "sub\\..\\..\\climb.txt",
    "climb\x00.txt",
    "climb\n.txt",
    "./climb.txt",
    "sub//climb.txt",
    "",
]
HOSTILE_IDS = [
    ("victim.txt", {"oid": "../../blob"}),
    ("victim.txt", {"oid": "../../../../../blob"}),
    ("weights.safetensors", {"lfs_oid": "../../../../../blob"}),
    ("victim.txt", {"oid": "A" * 40}),
    ("victim.txt", {"oid": "abc123"}),
    ("weights.safetensors", {"lfs_oid": "../../blob"}),
    ("weights.safetensors", {"lfs_oid": "0" * 63}),
    ("victim.txt", {"size": -5}),
    ("victim.txt", {"size": "12"}),
]


@pytest.fixture
def evil(local_hub: LocalHub) -> str:
    return local_hub.seed_files(
        REPO, {"config.json": CONFIG, "victim.txt": VICTIM, "weights.safetensors": WEIGHTS}
    )


def destination_for(layout: str, sandbox: Path) -> Path:
    return sandbox / "D" / "x" if layout == FOLDER else sandbox / "hf-cache"


def run_download(hub: LocalHub, destination: Path, layout: str) -> list[JobEvent]:
    events: list[JobEvent] = []
    request = DownloadRequest(REPO, str(destination), hub.endpoint, layout=layout)
    DownloadJob(request)(JobContext(emit=events.append))
    return events


def placed_file(destination: Path, layout: str, commit: str, name: str) -> Path:
    if layout == FOLDER:
        return destination / name
    return destination / "models--evil--repo" / "snapshots" / commit / name


def assert_refused_cleanly(
    error: DownloadError,
    shown: str,
    sandbox: Path,
    before: dict[str, tuple[int, int]],
    destination: Path,
    layout: str,
    commit: str,
) -> None:
    message = str(error)
    assert shown in message, message
    assert "refused and not downloaded" in message
    assert written_outside(before, tree_state(sandbox), destination) == []
    assert not [p for p in sandbox.rglob("*") if p.name.startswith("climb")]
    assert not list(sandbox.rglob("*.incomplete"))
    assert placed_file(destination, layout, commit, "config.json").read_bytes() == CONFIG


@pytest.mark.parametrize("layout", [FOLDER, CACHE])
@pytest.mark.parametrize("hostile", HOSTILE_PATHS, ids=repr)
@pytest.mark.slow
def test_a_listed_path_that_leaves_the_folder_is_refused(
    local_hub: LocalHub, evil: str, home: IsolatedHome, tmp_path: Path, hostile: str, layout: str
) -> None:
    hostile = hostile.format(sandbox=tmp_path)
    local_hub.forge_listing(REPO, "victim.txt", path=hostile)
    destination = destination_for(layout, tmp_path)
    before = tree_state(tmp_path)
    with pytest.raises(DownloadError) as caught:
        run_download(local_hub, destination, layout)
    assert_refused_cleanly(caught.value, repr(hostile), tmp_path, before, destination, layout, evil)
    weights = placed_file(destination, layout, evil, "weights.safetensors")
    assert weights.read_bytes() == WEIGHTS, "the safe files are still downloaded"
    assert local_hub.traffic.bytes_served(REPO, "victim.txt") == 0


@pytest.mark.parametrize("layout", [FOLDER, CACHE])
@pytest.mark.parametrize(("path", "forged"), HOSTILE_IDS, ids=repr)
@pytest.mark.slow
def test_a_listed_content_id_or_size_that_is_not_one_is_refused(
    local_hub: LocalHub,
    evil: str,
    home: IsolatedHome,
    tmp_path: Path,
    path: str,
    forged: dict[str, object],
    layout: str,
) -> None:
    local_hub.forge_listing(REPO, path, **forged)
    destination = destination_for(layout, tmp_path)
    before = tree_state(tmp_path)
    with pytest.raises(DownloadError) as caught:
        run_download(local_hub, destination, layout)
    assert_refused_cleanly(caught.value, repr(path), tmp_path, before, destination, layout, evil)
    [value] = forged.values()
    assert repr(value) in str(caught.value)
    assert not placed_file(destination, layout, evil, path).exists()
    assert not [
        p for p in tmp_path.rglob("blob*") if p.name in ("blob", "blob.lock", "blob.incomplete")
    ]


@pytest.mark.parametrize("layout", [FOLDER, CACHE])
def test_a_symlink_inside_the_destination_that_leads_out_is_not_followed(
    local_hub: LocalHub, home: IsolatedHome, tmp_path: Path, layout: str
) -> None:
    commit = local_hub.seed_files(REPO, {"config.json": CONFIG, "sub/victim.txt": VICTIM})
    destination = destination_for(layout, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = placed_file(destination, layout, commit, "sub")
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    before = tree_state(tmp_path)
    with pytest.raises(DownloadError) as caught:
        run_download(local_hub, destination, layout)
    assert "'sub/victim.txt'" in str(caught.value)
    assert "outside" in str(caught.value)
    assert list(elsewhere.iterdir()) == []
    assert written_outside(before, tree_state(tmp_path), destination) == []
    assert placed_file(destination, layout, commit, "config.json").read_bytes() == CONFIG


def test_entries_outside_the_include_patterns_are_neither_fetched_nor_reported(
    local_hub: LocalHub, evil: str, tmp_path: Path
) -> None:
    local_hub.forge_listing(REPO, "victim.txt", path="../climb.txt")
    events: list[JobEvent] = []
    request = DownloadRequest(
        REPO, str(tmp_path / "x"), local_hub.endpoint, include=("*.json",), layout=FOLDER
    )
    result = DownloadJob(request)(JobContext(emit=events.append))
    assert result.files == ("config.json",)
    assert any(isinstance(e, ResultEvent) for e in events)
    assert not any("climb" in e.message for e in events if isinstance(e, LogEvent))


def test_a_glob_that_matches_a_climbing_path_still_refuses_it(
    local_hub: LocalHub, evil: str, tmp_path: Path
) -> None:
    local_hub.forge_listing(REPO, "victim.txt", path="../climb.txt")
    request = DownloadRequest(
        REPO, str(tmp_path / "D" / "x"), local_hub.endpoint, include=("*.txt",), layout=FOLDER
    )
    with pytest.raises(DownloadError, match=re.escape("'../climb.txt'")):
        DownloadJob(request)(JobContext())
    assert not (tmp_path / "D" / "climb.txt").exists()


@pytest.mark.parametrize("revision", ["../../escape", "/abs", "main\x00", "C:x"])
def test_a_revision_that_would_become_a_path_outside_refs_is_refused(
    local_hub: LocalHub, tmp_path: Path, revision: str
) -> None:
    with pytest.raises(DownloadError, match=r"revision .* is refused"):
        DownloadRequest(REPO, str(tmp_path), local_hub.endpoint, revision=revision)


def test_the_cli_says_what_was_skipped_and_exits_non_zero(
    local_hub: LocalHub, evil: str, home: IsolatedHome, tmp_path: Path
) -> None:
    local_hub.forge_listing(REPO, "victim.txt", path="../climb.txt")
    target = tmp_path / "D" / "x"
    env = {
        **os.environ,
        "MTP_STUDIO_HOME": str(home.root / "mtp-studio"),
        "HF_HUB_CACHE": str(home.hub_cache),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "app", "download", REPO, "--dest", str(target)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "'../climb.txt'" in done.stderr
    assert "refused and not downloaded" in done.stderr
    assert not (tmp_path / "D" / "climb.txt").exists()
    assert (target / "config.json").read_bytes() == CONFIG
