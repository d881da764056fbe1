"""The local hub speaks the Hub's protocol well enough for the real client, and its faults work.

Every test drives the unmodified ``huggingface_hub`` client (or plain HTTP where the client has no
call for it) and checks what a user of the client would see: the bytes that come back, the commit
ids, the errors raised, and the server's own byte counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, constants, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from tests.localhub import LocalHub
from tests.localhub.fixtures import READ_ONLY_TOKEN, TEST_TOKEN

REPO = "acme/demo"


def _folder(tmp_path: Path, big_size: int = 3_000_000) -> Path:
    folder = tmp_path / "src"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"num_hidden_layers": 2}')
    (folder / "model.safetensors").write_bytes(os.urandom(big_size))
    (folder / "sub" / "notes.txt").write_text("hello")
    return folder


def test_whoami_tells_write_and_read_tokens_apart_and_rejects_others(local_hub: LocalHub) -> None:
    api = HfApi(endpoint=local_hub.endpoint)
    assert api.whoami(token=TEST_TOKEN)["auth"]["accessToken"]["role"] == "write"
    assert api.whoami(token=READ_ONLY_TOKEN)["auth"]["accessToken"]["role"] == "read"
    with pytest.raises(HfHubHTTPError, match="Invalid user token") as caught:
        api.whoami(token="hf_not_a_valid_token")
    assert caught.value.response.status_code == 401


def test_upload_folder_then_download_gives_the_same_bytes(hf_api: HfApi, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    hf_api.create_repo(REPO)
    commit = hf_api.upload_folder(repo_id=REPO, folder_path=folder, commit_message="add files")

    info = hf_api.model_info(REPO, files_metadata=True)
    assert re.fullmatch(r"[0-9a-f]{40}", info.sha) and info.sha == commit.oid
    siblings = {s.rfilename: s for s in info.siblings}
    weights = (folder / "model.safetensors").read_bytes()
    assert siblings["model.safetensors"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
    assert siblings["sub/notes.txt"].size == 5 and siblings["sub/notes.txt"].lfs is None
    for name in ("model.safetensors", "config.json", "sub/notes.txt"):
        local = hf_hub_download(REPO, name, revision=info.sha)
        assert Path(local).read_bytes() == (folder / name).read_bytes()


def test_lfs_downloads_redirect_to_storage_without_the_token(
    hf_api: HfApi, local_hub: LocalHub, tmp_path: Path
) -> None:
    local_hub.seed_folder(REPO, _folder(tmp_path))
    hf_hub_download(REPO, "model.safetensors")
    storage = local_hub.traffic.requests(method="GET", origin="storage")
    assert [r.file_path for r in storage] == ["model.safetensors"]
    assert not storage[0].had_authorization
    assert local_hub.storage_endpoint.split(":")[:2] != local_hub.endpoint.split(":")[:2] or (
        local_hub.storage_fell_back
    )


def test_commits_are_real_and_old_commits_stay_readable(hf_api: HfApi, local_hub: LocalHub) -> None:
    hf_api.create_repo(REPO)
    first = hf_api.create_commit(
        REPO, [CommitOperationAdd("a.txt", b"one")], commit_message="first"
    ).oid
    second = hf_api.create_commit(
        REPO, [CommitOperationAdd("a.txt", b"two")], commit_message="second", parent_commit=first
    ).oid
    assert first != second and hf_api.model_info(REPO).sha == second == local_hub.head(REPO)
    assert Path(hf_hub_download(REPO, "a.txt", revision=first)).read_bytes() == b"one"
    assert Path(hf_hub_download(REPO, "a.txt", revision="main")).read_bytes() == b"two"
    assert [c.title for c in hf_api.list_repo_commits(REPO)] == [
        "second",
        "first",
        "initial commit",
    ]
    with pytest.raises(HfHubHTTPError) as stale:
        hf_api.create_commit(
            REPO, [CommitOperationAdd("a.txt", b"x")], commit_message="late", parent_commit=first
        )
    assert stale.value.response.status_code == 412
    with pytest.raises(RevisionNotFoundError):
        hf_api.model_info(REPO, revision="f" * 40)


def test_create_repo_conflict_and_namespace_rules(local_hub: LocalHub) -> None:
    api = HfApi(endpoint=local_hub.endpoint, token=TEST_TOKEN)
    url = api.create_repo(REPO)
    assert api.create_repo(REPO, exist_ok=True) == url
    with pytest.raises(HfHubHTTPError) as conflict:
        api.create_repo(REPO)
    assert conflict.value.response.status_code == 409
    assert conflict.value.response.json()["url"] == f"{local_hub.endpoint}/{REPO}"
    with pytest.raises(HfHubHTTPError) as foreign:
        api.create_repo("someone-else/model")
    assert foreign.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as read_only:
        HfApi(endpoint=local_hub.endpoint, token=READ_ONLY_TOKEN).auth_check(REPO, write=True)
    assert read_only.value.response.status_code == 403
    api.auth_check(REPO, write=True)


def test_private_repos_are_hidden_from_anonymous_callers(local_hub: LocalHub) -> None:
    HfApi(endpoint=local_hub.endpoint, token=TEST_TOKEN).create_repo("acme/secret", private=True)
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=local_hub.endpoint).model_info("acme/secret", token=False)


def test_range_requests_answer_206_and_416(local_hub: LocalHub, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    local_hub.seed_folder(REPO, folder)
    content = (folder / "model.safetensors").read_bytes()
    url = f"{local_hub.endpoint}/{REPO}/resolve/main/model.safetensors"
    with httpx2.Client(follow_redirects=True) as client:
        part = client.get(url, headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and part.content == content[100:200]
        assert part.headers["Content-Range"] == f"bytes 100-199/{len(content)}"
        tail = client.get(url, headers={"Range": "bytes=-10"})
        assert tail.content == content[-10:]
        beyond = client.get(url, headers={"Range": f"bytes={len(content)}-"})
        assert beyond.status_code == 416
        head = client.head(url, follow_redirects=False)
    assert head.status_code == 302
    assert head.headers["X-Linked-Size"] == str(len(content))
    assert head.headers["X-Repo-Commit"] == local_hub.head(REPO)
    assert local_hub.traffic.bytes_served(REPO, "model.safetensors") == 100 + 10


@pytest.mark.slow
def test_multipart_upload_with_a_retried_part(hf_api: HfApi, local_hub: LocalHub) -> None:
    local_hub.context.multipart_threshold = 1 << 20
    local_hub.context.multipart_chunk_size = 1 << 20
    local_hub.faults.fail_part(2, times=1)
    data = os.urandom(3 * (1 << 20) + 12345)
    hf_api.create_repo(REPO)
    hf_api.create_commit(REPO, [CommitOperationAdd("big.bin", data)], commit_message="big")
    assert local_hub.read_file(REPO, "big.bin") == data
    puts = [r for r in local_hub.traffic.requests(method="PUT")]
    assert [r.status for r in puts] == [200, 500, 200, 200, 200]
    assert not any(r.had_authorization for r in puts)


@pytest.mark.slow
def test_a_dropped_upload_is_retried_by_the_client(hf_api: HfApi, local_hub: LocalHub) -> None:
    local_hub.faults.drop_upload(after_bytes=100_000, times=1)
    data = os.urandom(2_000_000)
    hf_api.create_repo(REPO)
    hf_api.create_commit(REPO, [CommitOperationAdd("w.safetensors", data)], commit_message="w")
    assert local_hub.read_file(REPO, "w.safetensors") == data
    puts = local_hub.traffic.requests(method="PUT")
    assert [r.dropped for r in puts] == [True, False]
    assert puts[0].bytes_received == 100_000


@pytest.mark.slow
def test_a_dropped_download_is_resumed_by_the_client(local_hub: LocalHub, tmp_path: Path) -> None:
    chunk = constants.DOWNLOAD_CHUNK_SIZE  # the client writes (and can resume) whole chunks
    folder = _folder(tmp_path, big_size=chunk + chunk // 2)
    local_hub.seed_folder(REPO, folder)
    local_hub.faults.drop_download("model.safetensors", after_bytes=chunk + 1000, times=1)
    path = hf_hub_download(REPO, "model.safetensors")
    assert Path(path).read_bytes() == (folder / "model.safetensors").read_bytes()
    gets = local_hub.traffic.requests(method="GET", origin="storage")
    assert [(r.dropped, r.bytes_sent) for r in gets] == [(True, chunk + 1000), (False, chunk // 2)]
    assert gets[1].byte_range == f"bytes={chunk}-"


def test_ignore_range_and_slow_faults(local_hub: LocalHub, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    local_hub.seed_folder(REPO, folder)
    local_hub.faults.ignore_range("model.safetensors")
    local_hub.faults.slow("/api/whoami-v2", delay_s=0.3, times=1)
    url = f"{local_hub.endpoint}/{REPO}/resolve/main/model.safetensors"
    with httpx2.Client(follow_redirects=True) as client:
        whole = client.get(url, headers={"Range": "bytes=0-9"})
        started = time.monotonic()
        client.get(
            f"{local_hub.endpoint}/api/whoami-v2", headers={"Authorization": f"Bearer {TEST_TOKEN}"}
        )
        waited = time.monotonic() - started
    assert whole.status_code == 200 and len(whole.content) == 3_000_000
    assert waited >= 0.3


def test_collections_create_once_and_hold_each_item_once(hf_api: HfApi) -> None:
    hf_api.create_repo(REPO)
    first = hf_api.create_collection("MTP Sidecars", namespace="acme", exists_ok=True)
    again = hf_api.create_collection("MTP Sidecars", namespace="acme", exists_ok=True)
    assert first.slug == again.slug
    hf_api.add_collection_item(first.slug, REPO, "model", exists_ok=True)
    collection = hf_api.add_collection_item(first.slug, REPO, "model", exists_ok=True)
    assert [item.item_id for item in collection.items] == [REPO]
    with pytest.raises(HfHubHTTPError) as duplicate:
        hf_api.add_collection_item(first.slug, REPO, "model")
    assert duplicate.value.response.status_code == 409
    listed = list(hf_api.list_collections(owner="acme"))
    assert [c.title for c in listed] == ["MTP Sidecars"]


def test_tree_paths_info_and_readme_card_data(
    hf_api: HfApi, local_hub: LocalHub, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    (folder / "README.md").write_text(
        "---\nlicense: other\nlicense_name: demo\ntags:\n- a\n---\nhi\n"
    )
    local_hub.seed_folder(REPO, folder)
    paths = {entry.path for entry in hf_api.list_repo_tree(REPO, recursive=True)}
    assert paths == {
        ".gitattributes",
        "README.md",
        "config.json",
        "model.safetensors",
        "sub",
        "sub/notes.txt",
    }
    top = {entry.path for entry in hf_api.list_repo_tree(REPO)}
    assert "sub/notes.txt" not in top and "sub" in top
    found = {e.path for e in hf_api.get_paths_info(REPO, ["sub", "config.json", "missing"])}
    assert found == {"sub", "config.json"}
    card = hf_api.model_info(REPO).card_data
    assert card.license == "other" and card.license_name == "demo" and card.tags == ["a"]


def test_a_broken_readme_front_matter_is_refused(hf_api: HfApi) -> None:
    hf_api.create_repo(REPO)
    with pytest.raises(ValueError, match="Invalid metadata"):
        hf_api.create_commit(
            REPO, [CommitOperationAdd("README.md", b"---\nlicense: mit\n")], commit_message="x"
        )


def test_command_line_server_persists_its_state(tmp_path: Path) -> None:
    data = tmp_path / "data"
    LocalHub(data).seed_files("acme/kept", {"config.json": b"{}"})
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.localhub", "--port", "0", "--data", str(data)],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = process.stdout.readline() if process.stdout else ""
        endpoint = re.search(r"(http://127\.0\.0\.1:\d+)", first_line).group(1)
        info = httpx2.get(f"{endpoint}/api/models/acme/kept").json()
        assert [s["rfilename"] for s in info["siblings"]] == [".gitattributes", "config.json"]
        assert json.loads(httpx2.get(f"{endpoint}/acme/kept/resolve/main/config.json").text) == {}
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_storage_falls_back_to_another_port_when_its_host_cannot_be_bound(tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) is never a local address, like 127.0.0.2 on a stock macOS.
    with LocalHub(tmp_path / "data", storage_host="192.0.2.1", token=TEST_TOKEN) as hub:
        assert hub.storage_fell_back
        assert hub.storage_endpoint.startswith("http://127.0.0.1:")
        assert hub.storage_endpoint != hub.endpoint
        hub.seed_files("acme/fallback", {"w.safetensors": b"\x01" * 1000})
        url = f"{hub.endpoint}/acme/fallback/resolve/main/w.safetensors"
        with httpx2.Client(follow_redirects=True) as client:
            assert client.get(url).content == b"\x01" * 1000
        assert [r.origin for r in hub.traffic.requests(method="GET")] == ["api", "storage"]
