"""Extracting from a Hub repo: pinned, selective, resumable, and honest about network failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.errors import HubError
from app.engine.hub import HubSource, pin_repo
from app.engine.mtp import extract_mtp
from tests.hub.sources import FAMILIES, local_extraction, read_sidecar, seed_source
from tests.localhub import LocalHub
from tests.localhub.fixtures import TEST_TOKEN
from tests.ports import free_port


def _source(hub: LocalHub, repo_id: str, **options) -> HubSource:
    pinned = pin_repo(repo_id, endpoint=hub.endpoint, token=TEST_TOKEN)
    return HubSource(pinned, endpoint=hub.endpoint, token=TEST_TOKEN, **options)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_hub_extraction_equals_local_and_fetches_only_the_mtp_bytes(
    local_hub: LocalHub, tmp_path: Path, name: str
) -> None:
    family = FAMILIES[name]
    checkpoint = seed_source(local_hub, family, tmp_path / "checkpoint")
    with _source(local_hub, family.repo_id) as source:
        result = extract_mtp(source, tmp_path / "hub.safetensors")
    local = read_sidecar(local_extraction(checkpoint.folder, tmp_path / "local.safetensors"))
    remote = read_sidecar(result.out_path)
    assert (remote.tensors, remote.data) == (local.tensors, local.data)
    served = local_hub.traffic.bytes_served(family.repo_id)
    assert served == source.bytes_fetched
    assert served <= 1.05 * checkpoint.bytes_needed
    mtp_shards = {checkpoint.shard_of[name] for name in checkpoint.mtp_names}
    assert served < sum((checkpoint.folder / shard).stat().st_size for shard in mtp_shards)


def test_a_broken_stream_resumes_at_the_byte_reached(local_hub: LocalHub, tmp_path: Path) -> None:
    family = FAMILIES["deepseek-fp8"]
    checkpoint = seed_source(local_hub, family, tmp_path / "checkpoint")
    last_shard = checkpoint.shard_files[-1].name
    local_hub.faults.drop_download(last_shard, after_bytes=100_000, times=1)
    notices: list[str] = []
    with _source(local_hub, family.repo_id, backoff_s=0.01, log=notices.append) as source:
        result = extract_mtp(source, tmp_path / "hub.safetensors")
    local = read_sidecar(local_extraction(checkpoint.folder, tmp_path / "local.safetensors"))
    assert read_sidecar(result.out_path).data == local.data
    gets = [r for r in local_hub.traffic.requests(method="GET") if r.file_path == last_shard]
    dropped = next(i for i, r in enumerate(gets) if r.dropped)
    first, resumed = gets[dropped], gets[dropped + 1]
    first_start = int(first.byte_range.split("=")[1].split("-")[0])
    assert resumed.byte_range.startswith(f"bytes={first_start + 100_000}-")
    assert any("resuming" in notice for notice in notices)


def test_a_server_ignoring_range_costs_one_whole_download_per_shard(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    family = FAMILIES["qwen-bf16"]
    checkpoint = seed_source(local_hub, family, tmp_path / "checkpoint")
    local_hub.faults.ignore_range(".safetensors")
    notices: list[str] = []
    scratch = tmp_path / "scratch"
    with _source(local_hub, family.repo_id, fallback_dir=scratch, log=notices.append) as source:
        result = extract_mtp(source, tmp_path / "hub.safetensors")
        assert any(scratch.iterdir())
    local = read_sidecar(local_extraction(checkpoint.folder, tmp_path / "local.safetensors"))
    assert read_sidecar(result.out_path).data == local.data
    mtp_shards = {checkpoint.shard_of[name] for name in checkpoint.mtp_names}
    for shard in mtp_shards:
        served = local_hub.traffic.bytes_served(family.repo_id, shard)
        assert served == (checkpoint.folder / shard).stat().st_size
    assert any("ignored the byte range" in notice for notice in notices)
    assert list(scratch.iterdir()) == []


def test_reads_stay_on_the_pinned_commit(local_hub: LocalHub, tmp_path: Path) -> None:
    local_hub.seed_files("acme/moving", {"config.json": b'{"v": 1}'})
    with _source(local_hub, "acme/moving") as source:
        local_hub.seed_files("acme/moving", {"config.json": b'{"v": 2}'})
        assert source.read_bytes("config.json") == b'{"v": 1}'
        assert source.label == f"acme/moving@{source.pinned.sha}"


def test_a_dead_connection_is_a_hub_error_not_no_heads(local_hub: LocalHub, tmp_path: Path) -> None:
    family = FAMILIES["qwen-bf16"]
    checkpoint = seed_source(local_hub, family, tmp_path / "checkpoint")
    local_hub.faults.drop_download(checkpoint.shard_files[-1].name, after_bytes=10, times=None)
    with (
        _source(local_hub, family.repo_id, attempts=3, backoff_s=0.01) as source,
        pytest.raises(HubError) as failure,
    ):
        extract_mtp(source, tmp_path / "hub.safetensors")
    message = str(failure.value)
    assert checkpoint.shard_files[-1].name in message and "connection to the Hub broke" in message
    assert "no MTP head" not in message
    assert not (tmp_path / "hub.safetensors").exists()


def test_an_unreachable_hub_or_missing_repo_is_a_hub_error(local_hub: LocalHub) -> None:
    closed_port = free_port()  # nothing listens there
    with pytest.raises(HubError, match=r"could not reach http://127\.0\.0\.1"):
        pin_repo("Qwen/Qwen3-6B", endpoint=f"http://127.0.0.1:{closed_port}", token=TEST_TOKEN)
    with pytest.raises(HubError, match="does not exist on"):
        pin_repo("Qwen/Nope", endpoint=local_hub.endpoint, token=TEST_TOKEN)
