"""The download job against the local hub with the real client: cache layout shared with
huggingface_hub, selective files, verification, and resume after a drop or a cancel."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.engine.download import CACHE, FOLDER, DownloadJob, DownloadRequest
from app.engine.download.fetch import FetchPolicy
from app.engine.errors import DownloadError, JobCancelled
from app.engine.jobs import JobContext, JobEvent, LogEvent, ProgressEvent, ResultEvent, StageEvent
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

REPO = "acme/tiny-mtp-model"
WEIGHTS = os.urandom(3_000_000)
HEADS = os.urandom(1_200_000)
CONFIG = json.dumps({"model_type": "qwen3_5", "mtp_num_hidden_layers": 1}).encode()
FAST_RETRY = FetchPolicy(first_wait_seconds=0.01, max_wait_seconds=0.05)


@pytest.fixture
def repo(local_hub: LocalHub) -> str:
    return local_hub.seed_files(
        REPO,
        {"config.json": CONFIG, "model.safetensors": WEIGHTS, "mtp.safetensors": HEADS},
    )


def request(hub: LocalHub, destination: Path, **changes: object) -> DownloadRequest:
    fields: dict[str, object] = {
        "repo_id": REPO,
        "destination": str(destination),
        "endpoint": hub.endpoint,
    }
    fields.update(changes)
    return DownloadRequest(**fields)  # type: ignore[arg-type]


def run(job: DownloadJob, events: list[JobEvent] | None = None, **kwargs: object):
    sink = events.append if events is not None else (lambda _event: None)
    return job(JobContext(emit=sink, **kwargs))  # type: ignore[arg-type]


def test_downloads_into_the_hugging_face_cache_that_other_tools_read(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    from huggingface_hub import hf_hub_download, scan_cache_dir, try_to_load_from_cache

    events: list[JobEvent] = []
    result = run(DownloadJob(request(local_hub, home.hub_cache)), events)

    snapshot = home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots" / repo
    assert result.location == snapshot
    assert (snapshot / "model.safetensors").read_bytes() == WEIGHTS
    assert (snapshot / "mtp.safetensors").is_symlink()
    assert (home.hub_cache / "models--acme--tiny-mtp-model" / "refs" / "main").read_text() == repo
    cached = try_to_load_from_cache(REPO, "mtp.safetensors", cache_dir=home.hub_cache)
    assert Path(str(cached)).read_bytes() == HEADS
    offline = hf_hub_download(REPO, "config.json", cache_dir=home.hub_cache, local_files_only=True)
    assert Path(offline).read_bytes() == CONFIG
    [cached_repo] = scan_cache_dir(home.hub_cache).repos
    [revision] = cached_repo.revisions
    assert revision.commit_hash == repo
    names = {file.file_name for file in revision.files}
    assert {"config.json", "model.safetensors", "mtp.safetensors"} <= names
    assert not list(home.hub_cache.rglob("*.incomplete"))

    summary = next(e for e in events if isinstance(e, ResultEvent)).summary
    assert summary["files"] == len(names)
    assert summary["downloaded_bytes"] == cached_repo.size_on_disk
    stages = [e.stage for e in events if isinstance(e, StageEvent)]
    assert stages[:2] == ["pin", "space"]
    last = [e for e in events if isinstance(e, ProgressEvent)][-1]
    assert (last.done, last.total) == (summary["downloaded_bytes"],) * 2


def test_only_the_chosen_files_are_fetched(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    job = DownloadJob(request(local_hub, home.hub_cache, include=("mtp.safetensors",)))
    result = run(job)
    assert result.files == ("mtp.safetensors",)
    assert local_hub.traffic.bytes_served(REPO, "model.safetensors") == 0
    assert local_hub.traffic.bytes_served(REPO, "mtp.safetensors") == len(HEADS)
    # A second run finds everything in place and fetches nothing.
    again = run(DownloadJob(request(local_hub, home.hub_cache, include=("mtp.safetensors",))))
    assert (again.downloaded_bytes, again.reused_bytes) == (0, len(HEADS))
    assert local_hub.traffic.bytes_served(REPO, "mtp.safetensors") == len(HEADS)


def test_a_plain_folder_gets_plain_files(local_hub: LocalHub, repo: str, tmp_path: Path) -> None:
    target = tmp_path / "models" / "tiny"
    result = run(DownloadJob(request(local_hub, target, layout=FOLDER)))
    assert result.location == target
    assert sorted(p.name for p in target.iterdir() if p.is_file()) == [
        ".gitattributes",
        "config.json",
        "model.safetensors",
        "mtp.safetensors",
    ]
    assert (target / "model.safetensors").read_bytes() == WEIGHTS
    assert not list(target.rglob("*.incomplete"))


def test_a_dropped_connection_is_resumed_not_restarted(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    local_hub.faults.drop_download(match="model.safetensors", after_bytes=1_000_000, times=2)
    events: list[JobEvent] = []
    job = DownloadJob(
        request(local_hub, home.hub_cache, include=("model.safetensors",)), FAST_RETRY
    )
    run(job, events)
    snapshot = home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots" / repo
    assert (snapshot / "model.safetensors").read_bytes() == WEIGHTS
    served = local_hub.traffic.bytes_served(REPO, "model.safetensors")
    assert served < len(WEIGHTS) + 300_000, "a resume must not fetch the file again"
    ranges = [
        r.byte_range
        for r in local_hub.traffic.requests("GET")
        if r.file_path == "model.safetensors" and r.status in (200, 206)
    ]
    assert ranges[0] == "bytes=0-"
    assert all(r.startswith("bytes=") and r != "bytes=0-" for r in ranges[1:])
    assert sum("connection problem" in e.message for e in events if isinstance(e, LogEvent)) == 2


def test_a_cancelled_download_continues_from_the_byte_reached(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    chosen = ("model.safetensors",)
    first = DownloadJob(request(local_hub, home.hub_cache, include=chosen))
    ctx = JobContext()

    def cancel_after_a_megabyte(event: JobEvent) -> None:
        if isinstance(event, ProgressEvent) and event.done >= 1_000_000:
            ctx.cancel.cancel()

    ctx.emit = cancel_after_a_megabyte
    with pytest.raises(JobCancelled):
        first(ctx)
    [partial] = list(home.hub_cache.rglob("*.incomplete"))
    kept = partial.stat().st_size
    assert 1_000_000 <= kept < len(WEIGHTS)

    events: list[JobEvent] = []
    second = run(DownloadJob(request(local_hub, home.hub_cache, include=chosen)), events)
    assert second.downloaded_bytes == len(WEIGHTS) - kept
    assert any(isinstance(e, LogEvent) and e.message.startswith("resuming:") for e in events)
    last_range = [r.byte_range for r in local_hub.traffic.requests("GET") if r.file_path][-1]
    assert last_range == f"bytes={kept}-"
    snapshot = home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots" / repo
    assert (snapshot / "model.safetensors").read_bytes() == WEIGHTS


def test_a_corrupted_partial_never_takes_the_final_name(
    local_hub: LocalHub, repo: str, home: IsolatedHome
) -> None:
    import hashlib

    blob = hashlib.sha256(HEADS).hexdigest()
    partial = home.hub_cache / "models--acme--tiny-mtp-model" / "blobs" / f"{blob}.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"\0" * 500_000)  # wrong bytes where the real file begins
    job = DownloadJob(request(local_hub, home.hub_cache, include=("mtp.safetensors",)))
    with pytest.raises(DownloadError, match=r"mtp\.safetensors: sha256 .* does not match"):
        run(job)
    assert not partial.exists()
    assert not (home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots").exists() or not list(
        (home.hub_cache / "models--acme--tiny-mtp-model" / "snapshots").rglob("mtp.safetensors")
    )
    # Running it again starts clean and succeeds.
    result = run(DownloadJob(request(local_hub, home.hub_cache, include=("mtp.safetensors",))))
    assert (result.location / "mtp.safetensors").read_bytes() == HEADS


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"repo_id": "acme/no-such-model"}, "does not exist or needs a token"),
        ({"revision": "v9"}, "revision 'v9' does not exist"),
        ({"include": ("*.gguf",)}, r"no file of acme/tiny-mtp-model .* matches \*\.gguf"),
    ],
)
def test_bad_requests_say_what_to_fix(
    local_hub: LocalHub, repo: str, home: IsolatedHome, changes: dict, expected: str
) -> None:
    with pytest.raises(DownloadError, match=expected):
        run(DownloadJob(request(local_hub, home.hub_cache, **changes)))


def test_an_unreachable_hub_is_a_clear_error(home: IsolatedHome) -> None:
    job = DownloadJob(
        DownloadRequest(REPO, str(home.hub_cache), endpoint="http://127.0.0.1:9", layout=CACHE)
    )
    with pytest.raises(DownloadError, match=r"cannot reach http://127\.0\.0\.1:9"):
        run(job)


def test_partial_files_of_another_interrupted_download_are_reported(
    local_hub: LocalHub, repo: str, tmp_path: Path
) -> None:
    """Issue 23: a killed download's partial files that this download will not resume are
    named in its log (the Jobs page shows it), so the space they hold is not lost unseen."""
    work = tmp_path / "model" / ".cache" / "mtp-studio"
    work.mkdir(parents=True)
    (work / "0123abcd.incomplete").write_bytes(bytes(2048))
    events: list[JobEvent] = []
    run(DownloadJob(request(local_hub, tmp_path / "model", layout=FOLDER)), events)
    logged = [e.message for e in events if isinstance(e, LogEvent)]
    assert any(
        line.startswith(f"1 partial file(s) (2.0 kB) in {work} are left from an interrupted")
        for line in logged
    ), logged
    assert (work / "0123abcd.incomplete").exists(), "reported, not deleted: it may be resumed"
