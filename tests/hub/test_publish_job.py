"""The publish job as the GUI drives it: its events, the commit pin, cancellation, the card."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from app.engine.errors import JobCancelled
from app.engine.hub import PUBLISHED, PublishOptions, publish_sidecar
from app.engine.hub.card import license_fields
from app.engine.hub.job import publish_job_from_params, publish_job_spec
from app.engine.jobs import JobContext, JobEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.publish_plan import MtpSidecarPlan
from app.engine.scratch import sidecar_output_path
from tests.hub.sources import FAMILIES, local_extraction, read_sidecar, seed_source
from tests.localhub import LocalHub
from tests.mtp.checkpoints import build_qwen35


def _plan(tmp_path: Path, name: str) -> MtpSidecarPlan:
    family = FAMILIES[name]
    return MtpSidecarPlan(
        source_repo=family.repo_id,
        sidecar_repo=family.sidecar_repo,
        output_path=sidecar_output_path(tmp_path / "scratch", family.sidecar_repo),
    )


def test_the_job_reports_its_stages_progress_and_result(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    seed_source(local_hub, FAMILIES["deepseek-fp8"], tmp_path / "checkpoint")
    events: list[JobEvent] = []
    result = publish_sidecar(
        _plan(tmp_path, "deepseek-fp8"), PublishOptions(), JobContext(emit=events.append)
    )
    stages = [e.stage for e in events if isinstance(e, StageEvent)]
    assert stages == [
        "preflight",
        "pin",
        "detect",
        "extract",
        "card",
        "upload",
        "collection",
        "clean",
    ]
    uploads = [e.done for e in events if isinstance(e, ProgressEvent) and e.stage == "upload"]
    assert uploads == sorted(uploads) and uploads[-1] == result.sidecar_bytes
    [final] = [e for e in events if isinstance(e, ResultEvent)]
    assert final.summary["outcome"] == PUBLISHED
    assert final.summary["commit_url"] == result.commit_url
    assert result.commit_url.endswith(local_hub.head(result.sidecar_repo))
    assert result.bytes_uploaded == result.sidecar_bytes


def test_a_source_that_moves_mid_job_does_not_change_the_sidecar(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    family = FAMILIES["qwen-bf16"]
    original = seed_source(local_hub, family, tmp_path / "checkpoint")
    pinned_sha = local_hub.head(family.repo_id)
    newer = build_qwen35(tmp_path / "newer", seed=99)  # same layout, different weights

    def move_main_once_detected(event: JobEvent) -> None:
        if isinstance(event, StageEvent) and event.stage == "extract":
            local_hub.seed_folder(family.repo_id, newer.folder, "New weights")

    result = publish_sidecar(
        _plan(tmp_path, "qwen-bf16"), PublishOptions(), JobContext(emit=move_main_once_detected)
    )
    assert local_hub.head(family.repo_id) != pinned_sha
    assert result.source_sha == pinned_sha
    published = read_sidecar(local_hub.read_file(family.sidecar_repo, "mtp.safetensors"))
    reference = read_sidecar(local_extraction(original.folder, tmp_path / "local.safetensors"))
    assert published.data == reference.data
    card = local_hub.read_file(family.sidecar_repo, "README.md").decode()
    assert pinned_sha in card


def test_cancelling_the_upload_keeps_scratch_and_says_so(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    seed_source(local_hub, FAMILIES["qwen-bf16"], tmp_path / "checkpoint")
    plan = _plan(tmp_path, "qwen-bf16")
    ctx = JobContext()

    def cancel_once_uploading(event: JobEvent) -> None:
        if isinstance(event, ProgressEvent) and event.stage == "upload" and event.done > 0:
            ctx.cancel.cancel()

    ctx.emit = cancel_once_uploading
    with pytest.raises(JobCancelled, match=re.escape(f"kept at {plan.output_path}")):
        publish_sidecar(plan, PublishOptions(), ctx)
    assert plan.output_path.exists()
    with pytest.raises(FileNotFoundError):
        local_hub.read_file(plan.sidecar_repo, "mtp.safetensors")


def test_a_source_without_a_card_publishes_without_a_license_and_warns(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    family = FAMILIES["qwen-bf16"]
    checkpoint = build_qwen35(tmp_path / "checkpoint")
    local_hub.seed_folder(family.repo_id, checkpoint.folder)
    result = publish_sidecar(_plan(tmp_path, "qwen-bf16"), PublishOptions())
    assert any("no README.md" in warning for warning in result.warnings)
    card = ModelCard(local_hub.read_file(family.sidecar_repo, "README.md").decode())
    assert "license" not in card.data.to_dict()
    assert card.data.base_model == family.repo_id


def test_license_fields_are_copied_value_for_value() -> None:
    readme = (
        "---\nlicense: other\nlicense_name: tongyi-qianwen\n"
        "license_link: https://example.org/LICENSE?x=1\ntags: [a]\n---\ntext"
    )
    assert license_fields(readme) == {
        "license": "other",
        "license_name": "tongyi-qianwen",
        "license_link": "https://example.org/LICENSE?x=1",
    }
    assert license_fields("# no front matter") == {}
    with pytest.raises(ValueError):
        license_fields("---\nlicense: [unclosed\n---\n")


def test_a_stored_publish_job_runs_again_from_its_parameters(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    seed_source(local_hub, FAMILIES["qwen-bf16"], tmp_path / "checkpoint")
    spec = publish_job_spec(_plan(tmp_path, "qwen-bf16"), PublishOptions(force=True))
    assert "token" not in str(spec.params).lower()
    result = publish_job_from_params(spec.params)(JobContext())
    assert result.outcome == PUBLISHED and result.sidecar_repo == "acme/qwen3-6b-mtp"
