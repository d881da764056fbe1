"""Names from files become paths only when safe: shards, upload, scratch, export, catalog.

A hostile checkpoint index can name a shard ``../../x``, an absolute path, or a shard that is a
symlink out of the folder; were it followed, another file's bytes would be copied into a sidecar
and published. Each case must fail with a message naming the entry, write no output, and leave
nothing half-written. The Hugging Face cache layout (snapshot files that are links into
``blobs``) must keep working.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from app.engine.catalog.rules import validate_entry
from app.engine.chat.conversation import ChatSettings, Conversation
from app.engine.chat.export import ExportError, export_conversation
from app.engine.chat.history import HistoryStore
from app.engine.errors import ExtractError, MtpStudioError, PublishError, ScratchError
from app.engine.hub.source import HubSource, pin_repo
from app.engine.hub.upload import commit_sidecar
from app.engine.jobs import JobContext
from app.engine.mtp import LocalFolderSource, extract_mtp
from app.engine.scratch import check_safe_to_clean, sidecar_output_path
from app.engine.settings import app_dirs
from tests.hardening.outside import tree_state, written_outside
from tests.localhub import LocalHub
from tests.localhub.fixtures import TEST_TOKEN
from tests.mtp.checkpoints import INDEX_FILE, SyntheticCheckpoint, build_qwen35


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> SyntheticCheckpoint:
    return build_qwen35(tmp_path_factory.mktemp("pristine") / "ckpt")


def small_conversation(folder: Path) -> Conversation:
    store = HistoryStore(folder / "history.sqlite3")
    conversation_id = store.create_conversation("Lines in a file", ChatSettings())
    store.add_user_message(conversation_id, "Count the lines of a file.")
    conversation = store.conversation(conversation_id)
    store.close()
    return conversation


def copy_checkpoint(pristine: SyntheticCheckpoint, sandbox: Path) -> Path:
    folder = sandbox / "ckpt"
    shutil.copytree(pristine.folder, folder)
    return folder


def point_tensor_at(folder: Path, tensor: str, shard: str) -> None:
    index_path = folder / INDEX_FILE
    index = json.loads(index_path.read_text())
    index["weight_map"][tensor] = shard
    index_path.write_text(json.dumps(index))


def shard_of(folder: Path, tensor: str) -> str:
    return json.loads((folder / INDEX_FILE).read_text())["weight_map"][tensor]


@pytest.mark.parametrize(
    "shard",
    ["../secret.safetensors", "../../secret.safetensors", "{sandbox}/secret.safetensors"],
)
def test_an_index_whose_shard_climbs_out_of_the_folder_is_refused(
    pristine: SyntheticCheckpoint, tmp_path: Path, shard: str
) -> None:
    folder = copy_checkpoint(pristine, tmp_path / "a")
    original = shard_of(folder, "mtp.fc.weight")
    shutil.copy(folder / original, tmp_path / "secret.safetensors")
    shutil.copy(folder / original, tmp_path / "a" / "secret.safetensors")
    shard = shard.format(sandbox=tmp_path)
    point_tensor_at(folder, "mtp.fc.weight", shard)
    out = tmp_path / "out" / "mtp.safetensors"
    out.parent.mkdir()
    before = tree_state(tmp_path)
    with pytest.raises(ExtractError) as caught:
        extract_mtp(LocalFolderSource(folder), out)
    assert repr(shard) in str(caught.value)
    assert "mtp.fc.weight" in str(caught.value)
    assert list(out.parent.iterdir()) == []
    assert written_outside(before, tree_state(tmp_path), out.parent) == []


def test_a_shard_that_is_a_symlink_out_of_the_folder_is_refused(
    pristine: SyntheticCheckpoint, tmp_path: Path
) -> None:
    folder = copy_checkpoint(pristine, tmp_path)
    original = shard_of(folder, "mtp.fc.weight")
    secret = tmp_path / "secret.safetensors"
    shutil.move(folder / original, secret)
    (folder / original).symlink_to(secret)
    out = tmp_path / "mtp.safetensors"
    with pytest.raises(ExtractError) as caught:
        extract_mtp(LocalFolderSource(folder), out)
    assert repr(original) in str(caught.value)
    assert "outside" in str(caught.value)
    assert not out.exists()
    assert not list(tmp_path.glob("*.partial")) + list(tmp_path.glob(".*mtp*"))


def test_a_hugging_face_cache_snapshot_whose_files_link_into_blobs_still_extracts(
    pristine: SyntheticCheckpoint, tmp_path: Path
) -> None:
    repo = tmp_path / "models--acme--ckpt"
    snapshot = repo / "snapshots" / ("a" * 40)
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for number, file in enumerate(sorted(pristine.folder.iterdir())):
        blob = repo / "blobs" / f"{number:064x}"
        shutil.copy(file, blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    result = extract_mtp(LocalFolderSource(snapshot), tmp_path / "mtp.safetensors")
    assert result.tensor_count == len(pristine.mtp_names)


def test_a_hub_checkpoint_whose_index_climbs_out_is_refused_before_any_shard_is_read(
    pristine: SyntheticCheckpoint, local_hub: LocalHub, tmp_path: Path
) -> None:
    folder = copy_checkpoint(pristine, tmp_path)
    point_tensor_at(folder, "mtp.fc.weight", "../../../etc/passwd")
    local_hub.seed_folder("evil/ckpt", folder)
    pinned = pin_repo("evil/ckpt", endpoint=local_hub.endpoint, token=TEST_TOKEN)
    with (
        HubSource(pinned, endpoint=local_hub.endpoint, token=TEST_TOKEN) as source,
        pytest.raises(ExtractError, match=re.escape("'../../../etc/passwd'")),
    ):
        extract_mtp(source, tmp_path / "mtp.safetensors")
    served = [r.file_path for r in local_hub.traffic.requests() if r.file_path]
    assert not [path for path in served if path.endswith(".safetensors")]
    assert not (tmp_path / "mtp.safetensors").exists()


@pytest.mark.parametrize("filename", ["../mtp.safetensors", "/mtp.safetensors", "a\\b", "x\x00"])
def test_an_unsafe_upload_path_is_refused_before_anything_is_sent(
    local_hub: LocalHub, tmp_path: Path, filename: str
) -> None:
    sidecar = tmp_path / "mtp.safetensors"
    sidecar.write_bytes(b"x" * 64)
    api = HfApi(endpoint=local_hub.endpoint, token=TEST_TOKEN)
    api.create_repo("mtp-tester/sidecar")
    with pytest.raises(PublishError, match="is refused"):
        commit_sidecar(
            api,
            "mtp-tester/sidecar",
            sidecar,
            "0" * 64,
            "card",
            filename=filename,
            message="m",
            description="d",
            on_position=lambda _position: None,
        )
    assert len(local_hub.store.repo("mtp-tester/sidecar").commits) == 1


@pytest.mark.parametrize("repo", ["../x", "acme/..", "acme/a\\b", "acme/x\ny", "C:/x"])
def test_a_sidecar_repo_that_would_name_a_file_outside_scratch_is_refused(
    tmp_path: Path, repo: str
) -> None:
    with pytest.raises(ScratchError, match="cannot name a scratch file"):
        sidecar_output_path(tmp_path, repo)


def test_a_plain_sidecar_repo_names_a_file_directly_in_scratch(tmp_path: Path) -> None:
    path = sidecar_output_path(tmp_path, "acme/qwen3-6b-mtp")
    assert path == tmp_path / "acme--qwen3-6b-mtp-mtp.safetensors"


def test_cleaning_a_scratch_folder_that_holds_the_app_history_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MTP_STUDIO_HOME", str(tmp_path / "home" / "app"))
    app_dirs().data.mkdir(parents=True)
    with pytest.raises(ScratchError, match="it holds the app's"):
        check_safe_to_clean(tmp_path / "home")
    with pytest.raises(ScratchError, match="it holds the app's job history"):
        check_safe_to_clean(app_dirs().data)
    assert app_dirs().data.is_dir()


def test_export_does_not_write_through_a_planted_link(tmp_path: Path) -> None:
    conversation = small_conversation(tmp_path)
    target = tmp_path / "chat.md"
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        (tmp_path / f".chat.md.{pid}.partial").symlink_to(victim)
    export_conversation(conversation, target)
    assert victim.read_text() == "untouched"
    assert target.read_text().startswith("# ")


@pytest.mark.parametrize("name", ["chat\x00.md", "chat\n.md"])
def test_export_refuses_a_file_name_with_control_characters(tmp_path: Path, name: str) -> None:
    conversation = small_conversation(tmp_path)
    target = tmp_path / "exports"
    target.mkdir()
    with pytest.raises(ExportError) as caught:
        export_conversation(conversation, target / name)
    assert repr(str(target / name)) in str(caught.value)
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("name", ["..", "a/b", "a\\b", "x\x00y", "C:x", "x\ny"])
def test_a_catalog_output_name_that_is_not_a_plain_name_is_an_error(name: str) -> None:
    fields = {
        "key": "demo",
        "source_model": "acme/demo",
        "quant": "4bit",
        "tier": "small",
        "slices": ["full"],
        "output_name": name,
        "hf_repo": "acme/demo-4bit",
    }
    problems = validate_entry(fields)
    assert any(p.field == "output_name" for p in problems), problems


def test_a_catalog_repo_id_with_a_trailing_newline_is_an_error() -> None:
    fields = {
        "key": "demo",
        "source_model": "acme/demo\n",
        "quant": "4bit",
        "tier": "small",
        "slices": ["full"],
        "output_name": "demo",
        "hf_repo": "acme/demo-4bit",
    }
    assert any(p.field == "source_model" for p in validate_entry(fields))


def test_publishing_from_a_repo_whose_index_climbs_out_uploads_and_writes_nothing(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    from app.engine.hub import PublishOptions, publish_sidecar
    from app.engine.publish_plan import MtpSidecarPlan
    from tests.hub.sources import FAMILIES

    family = FAMILIES["qwen-bf16"]
    folder = tmp_path / "checkpoint"
    family.build(folder)
    point_tensor_at(folder, "mtp.fc.weight", "../../../../etc/passwd")
    (folder / "README.md").write_text(family.card)
    local_hub.seed_folder(family.repo_id, folder)
    scratch = tmp_path / "scratch"
    plan = MtpSidecarPlan(
        source_repo=family.repo_id,
        sidecar_repo=family.sidecar_repo,
        output_path=sidecar_output_path(scratch, family.sidecar_repo),
    )
    with pytest.raises(MtpStudioError) as caught:
        publish_sidecar(plan, PublishOptions(), JobContext())
    assert "'../../../../etc/passwd'" in str(caught.value)
    assert not list(scratch.rglob("*.safetensors*"))
    sidecar = local_hub.store.repos.get(family.sidecar_repo)
    assert sidecar is None or not any(
        "mtp.safetensors" in c.files for c in sidecar.commits.values()
    )
