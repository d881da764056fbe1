"""A graft as a stored job: its parameters survive a restart, so the monitor can retry it.

The CLI, the chat window's "Add the MTP head" action and the download wizard all record a graft
under the kind ``graft`` with the same parameters (:meth:`GraftRequest.spec`); the job monitor's
retry rebuilds it with :func:`graft_job_from_params` (registered in the job store's kinds), so a
cancelled or failed graft runs again exactly as it was asked for.

:func:`default_output_path` decides where a grafted copy goes when the user did not say: beside
the base, unless the base lives in a Hugging Face cache (a folder other tools manage by content
hash), in which case the app's own ``grafted`` folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.errors import GraftError
from app.engine.graft.graft import GraftResult, graft_mtp
from app.engine.graft.head_file import graft_head_file
from app.engine.jobs import JobContext
from app.engine.store.records import JobSpec

GRAFT_KIND = "graft"
GRAFTED_DIR_NAME = "grafted"
GRAFTED_SUFFIX = "-mtp"


@dataclass(frozen=True)
class GraftRequest:
    base: Path
    sidecar: Path
    out: Path
    head_type: str = "q8_0"
    replace: bool = False

    @property
    def title(self) -> str:
        return f"Graft the MTP head of {self.sidecar.name} into {self.base.name}"

    def to_params(self) -> dict[str, Any]:
        return {
            "base": str(self.base),
            "sidecar": str(self.sidecar),
            "out": str(self.out),
            "head_type": self.head_type,
            "replace": self.replace,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> GraftRequest:
        try:
            return cls(
                base=Path(params["base"]),
                sidecar=Path(params["sidecar"]),
                out=Path(params["out"]),
                head_type=str(params.get("head_type", "q8_0")),
                replace=bool(params.get("replace", False)),
            )
        except KeyError as exc:
            raise GraftError(f"the stored graft job lacks its {exc.args[0]!r} parameter") from None

    def spec(self) -> JobSpec:
        """The job-history record (paths as given, so a retry writes the same file)."""
        return JobSpec(GRAFT_KIND, self.title, self.to_params())

    def run(self, ctx: JobContext) -> GraftResult:
        """Graft a sidecar (``.safetensors``) or a converter's separate head file (``.gguf``,
        whose tensors are copied as stored, so ``head_type`` does not apply)."""
        if self.sidecar.suffix.lower() == ".gguf":
            if self.replace:
                raise GraftError("--replace takes a sidecar, not a head GGUF; graft into a trunk")
            return graft_head_file(self.base, self.sidecar, self.out, ctx)
        return graft_mtp(self.base, self.sidecar, self.out, self.head_type, self.replace, ctx)


def graft_job_from_params(params: dict[str, Any]) -> Callable[[JobContext], GraftResult]:
    """The factory the job store uses to run (or retry) a graft from its stored parameters."""
    return GraftRequest.from_params(params).run


def in_hugging_face_cache(path: Path) -> bool:
    """True for a file under a cache's ``models--owner--name/snapshots/`` folder."""
    parts = Path(path).parts
    return any(
        part.startswith("models--") and index + 1 < len(parts) and parts[index + 1] == "snapshots"
        for index, part in enumerate(parts)
    )


def default_output_path(base: Path, grafted_dir: Path) -> Path:
    """``<stem>-mtp.gguf`` beside ``base``, or in ``grafted_dir`` when that folder cannot."""
    name = f"{Path(base).stem}{GRAFTED_SUFFIX}.gguf"
    folder = Path(base).parent
    if in_hugging_face_cache(base) or not os.access(folder, os.W_OK):
        return Path(grafted_dir) / name
    return folder / name
