"""The scratch folder: where a publish writes its sidecar before uploading, and how to clean it.

A publish extracts a sidecar of up to several GB to local disk before uploading it; a failure before
the upload completes leaves it there for inspection and retry
(docs/architecture.md#the-publish-pipeline). This module decides where that folder is
(``--scratch``, else ``MTP_STUDIO_SCRATCH``, else ``scratch`` in the user cache folder), names the
files in it, and empties it on request — refusing any folder whose removal would be a disaster
(``/``, the home folder, the current folder or one of their parents).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from app.engine.errors import ScratchError
from app.engine.safepath import plain_name_problem
from app.engine.settings import app_dirs, hf_hub_cache
from app.engine.units import format_bytes

SCRATCH_ENV = "MTP_STUDIO_SCRATCH"


@dataclass(frozen=True)
class ScratchUsage:
    """How much a scratch folder holds (or held, for a clean): files and their bytes."""

    folder: Path
    files: int
    bytes: int

    def describe(self) -> str:
        noun = "file" if self.files == 1 else "files"
        return f"{self.files} {noun} ({format_bytes(self.bytes)})"


def resolve_scratch(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The scratch folder to use: ``explicit``, else ``$MTP_STUDIO_SCRATCH``, else the default.

    The default is ``scratch`` in the platformdirs user cache folder of the app. The folder is not
    created here, so resolving it (as a dry run does) has no side effect.
    """
    chosen = explicit or os.environ.get(SCRATCH_ENV) or app_dirs().default_scratch
    return Path(chosen).expanduser().absolute()


def sidecar_output_path(scratch: Path, sidecar_repo: str) -> Path:
    """Where a sidecar for ``sidecar_repo`` is written before upload.

    ``acme/qwen3-6b-mtp`` → ``<scratch>/acme--qwen3-6b-mtp-mtp.safetensors``: the repo id with
    ``/`` turned into ``--`` (which a Hub repo id cannot contain, so names never collide). A repo
    id whose parts are not plain names (``..``, a backslash, a control character) is refused, so
    the file always lands directly inside ``scratch``.
    """
    owner, _, name = sidecar_repo.partition("/")
    problem = plain_name_problem(owner) or plain_name_problem(name)
    if problem is not None:
        raise ScratchError(
            f"sidecar repo {sidecar_repo!r} cannot name a scratch file: {problem}; give the "
            "catalog entry's mtp_sidecar_repo as owner/name"
        )
    return scratch / f"{owner}--{name}-mtp.safetensors"


def check_safe_to_clean(folder: Path) -> Path:
    """Return ``folder`` with symlinks resolved, or raise :class:`ScratchError` saying why not.

    Refused: the filesystem root, the home folder and its parents, the current folder and its
    parents, a folder holding the app's settings, history or logs or the Hugging Face cache, and
    anything that exists but is not a folder.
    """
    resolved = folder.expanduser().resolve()
    home = Path.home().resolve()
    cwd = Path.cwd().resolve()
    reason = None
    if resolved == Path(resolved.anchor):
        reason = "it is the root of the filesystem"
    elif resolved == home:
        reason = "it is your home folder"
    elif resolved in home.parents:
        reason = "it contains your home folder"
    elif resolved == cwd:
        reason = "it is the current folder"
    elif resolved in cwd.parents:
        reason = "it contains the current folder"
    elif resolved.exists() and not resolved.is_dir():
        reason = "it is a file, not a folder"
    else:
        reason = _holds_precious_folder(resolved)
    if reason is not None:
        shown = f"{folder} (= {resolved})" if resolved != folder else str(folder)
        raise ScratchError(
            f"refusing to clean {shown}: {reason}; point --scratch or {SCRATCH_ENV} at a "
            "folder used only for scratch files"
        )
    return resolved


def _holds_precious_folder(resolved: Path) -> str | None:
    dirs = app_dirs()
    precious = {
        "the app's settings": dirs.config,
        "the app's job history": dirs.data,
        "the app's logs": dirs.logs,
        "the Hugging Face cache": hf_hub_cache(),
    }
    for what, folder in precious.items():
        folder = folder.expanduser().resolve()
        if folder == resolved or resolved in folder.parents:
            return f"it holds {what} ({folder})"
    return None


def scratch_usage(folder: Path) -> ScratchUsage:
    """Count the files under ``folder`` without following symlinks (a missing folder holds none)."""
    files = 0
    size = 0
    if not folder.is_dir():
        return ScratchUsage(folder, 0, 0)
    for root, dirs, names in os.walk(folder, followlinks=False):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            files += 1
            size += os.lstat(os.path.join(root, name)).st_size
    return ScratchUsage(folder, files, size)


def clean_scratch(folder: Path) -> ScratchUsage:
    """Remove everything inside ``folder`` (kept itself) and return what was removed.

    Symlinks inside are removed as links; what they point to is never touched.
    """
    resolved = check_safe_to_clean(folder)
    usage = scratch_usage(resolved)
    if not resolved.is_dir():
        return usage
    for child in resolved.iterdir():
        try:
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        except OSError as exc:
            raise ScratchError(
                f"could not remove {child} while cleaning {resolved}: {exc.strerror}; "
                "check its permissions and run `mtp-studio scratch clean` again"
            ) from exc
    return usage
