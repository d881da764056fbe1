"""What a publish of one catalog entry will do, decided before anything touches the network.

The dry run prints this plan; the GUI's publish wizard shows it for confirmation; the real publish
(app.engine.hub) executes it. Building it in one place keeps the three in agreement on the source
repo, the sidecar repo and file, the precision and the scratch path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from app.engine.catalog import CatalogEntry
from app.engine.errors import PublishError
from app.engine.scratch import sidecar_output_path

SIDECAR_FILENAME = "mtp.safetensors"
SIDECAR_PRECISION = "bf16"
ALL_ARTIFACTS = "all"


class ArtifactKind(StrEnum):
    """Something a publish can produce for a catalog entry."""

    MTP = "mtp"


def artifact_kinds(choice: str) -> tuple[ArtifactKind, ...]:
    """``"mtp"`` → (MTP,); ``"all"`` → every kind this version knows."""
    if choice == ALL_ARTIFACTS:
        return tuple(ArtifactKind)
    try:
        return (ArtifactKind(choice),)
    except ValueError:
        known = ", ".join([*ArtifactKind, ALL_ARTIFACTS])
        raise PublishError(f"unknown artifact {choice!r}; choose one of {known}") from None


@dataclass(frozen=True)
class MtpSidecarPlan:
    """Extract the MTP heads of ``source_repo`` in BF16 and upload them to ``sidecar_repo``."""

    source_repo: str
    sidecar_repo: str
    output_path: Path
    filename: str = SIDECAR_FILENAME
    precision: str = SIDECAR_PRECISION

    def describe(self) -> list[str]:
        """The dry-run lines, in the format of issue 2."""
        return [
            f"mtp source repo: hf://{self.source_repo}",
            f"mtp sidecar repo: hf://{self.sidecar_repo}/{self.filename}",
            f"mtp precision: {self.precision} (unquantized)",
            f"mtp output path: {self.output_path}",
        ]


@dataclass(frozen=True)
class PublishPlan:
    """Everything one publish will produce for one catalog entry."""

    entry: CatalogEntry
    scratch: Path
    mtp: MtpSidecarPlan | None

    def describe(self) -> list[str]:
        return self.mtp.describe() if self.mtp is not None else []


def plan_publish(
    entry: CatalogEntry, artifacts: Iterable[ArtifactKind], scratch: Path
) -> PublishPlan:
    """Decide what publishing ``artifacts`` of ``entry`` means; raise :class:`PublishError` if the
    entry lacks what an artifact needs."""
    mtp = None
    if ArtifactKind.MTP in tuple(artifacts):
        if entry.mtp_source_repo is None or entry.mtp_sidecar_repo is None:
            raise PublishError(
                f"no MTP sidecar configured for {entry.key}; add mtp_source_repo and "
                "mtp_sidecar_repo to the catalog entry"
            )
        mtp = MtpSidecarPlan(
            source_repo=entry.mtp_source_repo,
            sidecar_repo=entry.mtp_sidecar_repo,
            output_path=sidecar_output_path(scratch, entry.mtp_sidecar_repo),
        )
    return PublishPlan(entry=entry, scratch=scratch, mtp=mtp)
