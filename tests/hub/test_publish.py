"""``mtp-studio publish`` end to end: the real CLI and client against the local hub.

Each test publishes from a source repo on the local hub (a sharded FP8 DeepSeek-style checkpoint
or a BF16 Qwen-style one, each with a licensed model card) and checks what its user would:
the file on the sidecar repo, its card, the collection, the messages and exit code, what stays in
scratch — and, through the server's own counters, what crossed the network.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi, ModelCard

from app.cli import main
from app.engine.hub.receipt import receipt_path
from app.engine.scratch import SCRATCH_ENV, sidecar_output_path
from tests.catalog.helpers import entry, write_catalog
from tests.hub.sources import (
    FAMILIES,
    local_extraction,
    read_sidecar,
    seed_source,
    seed_trunk_only,
)
from tests.localhub import LocalHub
from tests.localhub.fixtures import READ_ONLY_TOKEN, TEST_TOKEN
from tests.mtp.checkpoints import SyntheticCheckpoint

KEY = "demo-model"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTP_STUDIO_HOME", str(tmp_path / "app-home"))
    monkeypatch.delenv(SCRATCH_ENV, raising=False)


class Publisher:
    """Runs ``mtp-studio publish`` for one catalog entry and keeps its output."""

    def __init__(
        self, tmp_path: Path, source_repo: str, sidecar_repo: str, capsys: pytest.CaptureFixture
    ) -> None:
        self.source_repo = source_repo
        self.sidecar_repo = sidecar_repo
        self.scratch = tmp_path / "scratch"
        self.catalog = write_catalog(
            tmp_path / "catalog.yaml",
            entry(KEY, mtp_source_repo=source_repo, mtp_sidecar_repo=sidecar_repo),
            entry("no-mtp", mtp_source_repo=None, mtp_sidecar_repo=None),
        )
        self._capsys = capsys
        self.out = self.err = ""

    @property
    def output(self) -> Path:
        return sidecar_output_path(self.scratch, self.sidecar_repo)

    def __call__(self, *extra: str, key: str = KEY) -> int:
        argv = ["publish", "--model", key, "--artifact", "mtp", "--catalog", str(self.catalog)]
        code = main([*argv, "--scratch", str(self.scratch), *extra])
        captured = self._capsys.readouterr()
        self.out, self.err = captured.out, captured.err
        assert TEST_TOKEN not in self.out + self.err
        return code


def _publisher(
    tmp_path: Path, hub: LocalHub, name: str, capsys
) -> tuple[Publisher, SyntheticCheckpoint]:
    family = FAMILIES[name]
    checkpoint = seed_source(hub, family, tmp_path / "checkpoint")
    return Publisher(tmp_path, family.repo_id, family.sidecar_repo, capsys), checkpoint


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.slow
def test_publish_uploads_the_exact_local_extraction_with_card_and_collection(
    local_hub: LocalHub, hf_api: HfApi, tmp_path: Path, capsys, name: str
) -> None:
    publish, checkpoint = _publisher(tmp_path, local_hub, name, capsys)
    family = FAMILIES[name]
    source_sha = local_hub.head(family.repo_id)
    reference = read_sidecar(local_extraction(checkpoint.folder, tmp_path / "local.safetensors"))

    assert publish() == 0, publish.err

    published = read_sidecar(local_hub.read_file(family.sidecar_repo, "mtp.safetensors"))
    assert published.tensors == reference.tensors
    assert published.data == reference.data
    assert published.metadata["source_repo"] == family.repo_id
    assert published.metadata["source_revision"] == source_sha

    card = ModelCard(local_hub.read_file(family.sidecar_repo, "README.md").decode())
    for field_name, value in family.licence.items():
        assert card.data.to_dict()[field_name] == value
    assert card.data.base_model == family.repo_id
    assert "mtp-sidecar" in card.data.tags
    assert source_sha in card.text and "not a standalone model" in card.text

    head = hf_api.list_repo_commits(family.sidecar_repo)[0]
    files_at_head = {
        f.path for f in hf_api.list_repo_tree(family.sidecar_repo, revision=head.commit_id)
    }
    assert {"mtp.safetensors", "README.md"} <= files_at_head
    assert len(hf_api.list_repo_commits(family.sidecar_repo)) == 2  # the Hub's initial one + ours

    [collection] = list(hf_api.list_collections(owner="acme"))
    assert collection.title == "MTP Sidecars"
    assert [item.item_id for item in collection.items] == [family.sidecar_repo]

    assert local_hub.traffic.bytes_served(family.repo_id) <= 1.05 * checkpoint.bytes_needed
    assert not publish.output.exists() and not receipt_path(publish.output).exists()
    assert f"mtp: published hf://{family.sidecar_repo}/mtp.safetensors" in publish.out


def test_upload_progress_lines_count_bytes_sent(
    local_hub: LocalHub, tmp_path: Path, capsys
) -> None:
    local_hub.context.multipart_threshold = 100_000  # several parts, sent one after another
    local_hub.context.multipart_chunk_size = 100_000
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    assert publish() == 0, publish.err
    lines = [line for line in publish.out.splitlines() if line.startswith("mtp: uploading ")]
    progress = [re.fullmatch(r"mtp: uploading (\d+)% \((.+) / (.+)\)", line) for line in lines]
    percents = [int(match.group(1)) for match in progress if match]
    assert percents and percents == sorted(percents) and percents[-1] == 100
    assert len(percents) <= 101
    put_bytes = sum(r.bytes_received for r in local_hub.traffic.requests(method="PUT"))
    size = len(local_hub.read_file(publish.sidecar_repo, "mtp.safetensors"))
    assert put_bytes == size  # no extra pass: every byte read was a byte sent


@pytest.mark.slow
def test_a_second_publish_skips_and_force_publishes_again(
    local_hub: LocalHub, hf_api: HfApi, tmp_path: Path, capsys
) -> None:
    publish, _ = _publisher(tmp_path, local_hub, "deepseek-fp8", capsys)
    family = FAMILIES["deepseek-fp8"]
    assert publish() == 0
    first_head = local_hub.head(family.sidecar_repo)
    local_hub.traffic.reset()

    assert publish() == 0
    assert f"already covers {family.repo_id}" in publish.out
    assert local_hub.traffic.bytes_served(family.repo_id) == 0
    assert local_hub.head(family.sidecar_repo) == first_head

    # The card records when the sidecar was made, to the second; in the same second as the
    # first publish the forced one would be byte-identical and the Hub keeps its commit.
    time.sleep(1.0 - time.time() % 1.0)
    assert publish("--force") == 0
    assert local_hub.head(family.sidecar_repo) != first_head
    assert local_hub.traffic.bytes_served(family.repo_id) > 0
    [collection] = list(hf_api.list_collections(owner="acme"))
    assert [item.item_id for item in collection.items] == [family.sidecar_repo]


def test_dry_run_sends_no_request(local_hub: LocalHub, tmp_path: Path, capsys) -> None:
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    local_hub.traffic.reset()
    assert publish("--dry-run") == 0
    assert publish.out.startswith("mtp source repo: hf://Qwen/Qwen3-6B\n")
    assert local_hub.traffic.count() == 0


@pytest.mark.slow
def test_a_dropped_upload_keeps_scratch_and_a_retry_reuses_it(
    local_hub: LocalHub, tmp_path: Path, capsys
) -> None:
    """Slow on purpose (~25 s): the client retries a dropped PUT five times with its own backoff
    (1, 2, 4, 8, 8 s); the fault stays armed until all attempts have failed."""
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    family = FAMILIES["qwen-bf16"]
    local_hub.faults.drop_upload(after_bytes=50_000, times=None)

    assert publish() == 2
    assert f"the extracted sidecar is kept at {publish.output}" in publish.err
    assert "run the same publish again" in publish.err
    assert publish.output.exists() and receipt_path(publish.output).exists()
    assert not HfApi(endpoint=local_hub.endpoint).file_exists(
        family.sidecar_repo, "mtp.safetensors"
    )

    local_hub.faults.clear()
    local_hub.traffic.reset()
    assert publish() == 0, publish.err
    assert "reusing" in publish.out
    shards = {
        p for (repo, p) in local_hub.traffic.bytes_served_per_file() if repo == family.repo_id
    }
    assert not any(p.endswith(".safetensors") for p in shards)  # nothing extracted again
    assert not publish.output.exists()
    assert local_hub.read_file(family.sidecar_repo, "mtp.safetensors")


def test_collection_can_be_turned_off_by_the_environment(
    local_hub: LocalHub, hf_api: HfApi, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("MTP_STUDIO_COLLECTION", "off")
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    assert publish() == 0
    assert list(hf_api.list_collections(owner="acme")) == []
    assert "not filing into 'MTP Sidecars' (turned off)" in publish.out


def test_a_checkpoint_without_heads_fails_and_creates_nothing(
    local_hub: LocalHub, tmp_path: Path, capsys
) -> None:
    seed_trunk_only(local_hub, "mlx-community/Qwen3-6B-4bit", tmp_path / "converted")
    publish = Publisher(tmp_path, "mlx-community/Qwen3-6B-4bit", "acme/qwen3-6b-mtp", capsys)
    assert publish() == 2
    assert "no MTP head tensors found in mlx-community/Qwen3-6B-4bit@" in publish.err
    assert "acme/qwen3-6b-mtp" not in local_hub.store.repos
    assert not publish.output.exists()


def test_an_entry_without_mtp_fields_is_refused_before_any_request(
    local_hub: LocalHub, tmp_path: Path, capsys
) -> None:
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    local_hub.traffic.reset()
    assert publish(key="no-mtp") == 2
    assert publish.err == (
        "mtp-studio: error: no MTP sidecar configured for no-mtp; add mtp_source_repo and "
        "mtp_sidecar_repo to the catalog entry\n"
    )
    assert local_hub.traffic.count() == 0


def test_without_a_token_nothing_is_fetched(
    local_hub: LocalHub, tmp_path: Path, capsys, monkeypatch
) -> None:
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    monkeypatch.delenv("HF_TOKEN")
    local_hub.traffic.reset()
    assert publish() == 2
    assert "no Hub token found: set HF_TOKEN, or sign in with `hf auth login`" in publish.err
    assert local_hub.traffic.count() == 0


def test_a_read_only_token_is_refused_before_any_download(
    local_hub: LocalHub, tmp_path: Path, capsys, monkeypatch
) -> None:
    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    monkeypatch.setenv("HF_TOKEN", READ_ONLY_TOKEN)
    assert publish() == 2
    assert "read-only" in publish.err and READ_ONLY_TOKEN not in publish.err
    assert local_hub.traffic.bytes_served(publish.source_repo) == 0


def test_a_namespace_the_account_cannot_write_is_refused(
    local_hub: LocalHub, tmp_path: Path, capsys
) -> None:
    family = FAMILIES["qwen-bf16"]
    seed_source(local_hub, family, tmp_path / "checkpoint")
    publish = Publisher(tmp_path, family.repo_id, "someone-else/qwen3-6b-mtp", capsys)
    assert publish() == 2
    assert "cannot write to the someone-else namespace" in publish.err
    assert local_hub.traffic.bytes_served(family.repo_id) == 0


def test_the_token_file_of_hf_auth_login_is_used(
    local_hub: LocalHub, tmp_path: Path, capsys, monkeypatch
) -> None:
    from huggingface_hub import constants

    publish, _ = _publisher(tmp_path, local_hub, "qwen-bf16", capsys)
    monkeypatch.delenv("HF_TOKEN")
    token_file = Path(constants.HF_TOKEN_PATH)
    token_file.parent.mkdir(parents=True, exist_ok=True)  # as `hf auth login` makes it
    token_file.write_text(TEST_TOKEN)
    assert publish() == 0, publish.err
