"""Deleting a model from disk: first a plan with the real bytes it frees, then the deletion.

The split lets the library ask "Delete X? This frees 1.2 GB" with the figure the deletion will
actually free, and only then remove anything.

- A model in a Hugging Face cache is deleted with huggingface_hub's own cache API, which knows
  which blobs other revisions or files still link: when no other weights of the repo stay, every
  cached revision goes (``delete_revisions``: the repo's whole cache folder); otherwise only the
  model's files in each revision (``delete_files``: a sibling quant of the same repo stays). A
  vision projector or a separate head file is no model of its own: it stays while another model
  of the repo stays, and goes with the last one (:mod:`app.engine.library.projectors`).
- Anything else is removed only when it lies inside one of the library's roots (the models
  folder, the grafted copies) or is a file the user opened by hand; a symlink is never followed
  (a model that is a link is refused), and the bundled demo model is never deleted. The vision
  projectors beside a GGUF go with it unless another model in its folder stays.

Every refusal and failure is a :class:`~app.engine.errors.LibraryError` naming the path and
what to do about it.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import DeleteCacheStrategy

from app.engine.download.quantisation import is_head_file, is_projector
from app.engine.errors import LibraryError
from app.engine.library.disk import (
    WEIGHT_SUFFIXES,
    model_targets,
    plain_bytes,
    scan,
    selected_files,
    selection_for,
)
from app.engine.library.inventory import (
    BUNDLED,
    HF_CACHE,
    OPENED_FILE,
    LibraryModel,
)
from app.engine.library.projectors import other_models_beside
from app.engine.safepath import escape_problem


@dataclass(frozen=True)
class DeletePlan:
    """What deleting ``model`` removes (``paths``) and the bytes that frees. ``cache_strategy``
    is huggingface_hub's plan for a model in a Hugging Face cache (None elsewhere)."""

    model: LibraryModel
    paths: tuple[Path, ...]
    freed_bytes: int
    cache_strategy: DeleteCacheStrategy | None = None


def plan_delete(model: LibraryModel) -> DeletePlan:
    """Work out what deleting ``model`` removes and frees; nothing is touched."""
    if model.location.kind == BUNDLED:
        raise LibraryError(
            f"{model.path} is the bundled demo model and cannot be deleted; it ships with the "
            "app so chat always works (it takes only a few MB)"
        )
    if model.location.kind == HF_CACHE:
        return _plan_cache_delete(model)
    return _plan_plain_delete(model)


def delete(plan: DeletePlan) -> int:
    """Carry out ``plan``; returns the bytes freed. Raises naming what could not be removed."""
    if plan.cache_strategy is not None:
        strategy = plan.cache_strategy
        try:
            strategy.execute()  # logs, rather than raises, most it cannot remove: checked below
        except OSError as exc:
            raise LibraryError(_failure_message(Path(exc.filename or plan.paths[0]), exc)) from None
        leftovers = [
            path
            for path in (*strategy.repos, *strategy.snapshots, *strategy.files, *strategy.blobs)
            if os.path.lexists(path)
        ]
        if leftovers:
            raise LibraryError(_leftover_message(plan.model, leftovers))
        return plan.freed_bytes
    for path in plan.paths:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise LibraryError(_failure_message(path, exc)) from None
    return plan.freed_bytes


# -- Hugging Face cache -------------------------------------------------------------------------


def _plan_cache_delete(model: LibraryModel) -> DeletePlan:
    location = model.location
    assert location.repo_folder is not None and location.root is not None
    info = scan(location.root)
    repo = None
    if info is not None:
        repo = next((r for r in info.repos if Path(r.repo_path) == location.repo_folder), None)
    if info is None or repo is None:
        damage = [
            str(w) for w in (info.warnings if info else []) if str(location.repo_folder) in str(w)
        ]
        why = f"it is damaged ({damage[0]})" if damage else "deleted by another tool?"
        raise LibraryError(
            f"{location.repo_folder} cannot be read from the Hugging Face cache {location.root} "
            f"({why}); refresh the library, or remove that folder by hand if it stays"
        )
    snapshot = location.repo_folder / "snapshots" / (location.revision or "")
    files = selected_files(repo, selection_for(model.description, snapshot))
    chosen = {Path(file.file_path) for file in files}
    others_stay = any(
        Path(file.file_path) not in chosen and _is_model_weight(file.file_name)
        for revision in repo.revisions
        for file in revision.files
    )
    if others_stay:
        strategy = info.delete_files(*files)
        paths = tuple(sorted(chosen))
    else:
        strategy = info.delete_revisions(*(revision.commit_hash for revision in repo.revisions))
        paths = (Path(repo.repo_path),)
    freed = strategy.expected_freed_size
    if strategy.repos:
        scanned = {Path(file.blob_path) for revision in repo.revisions for file in revision.files}
        freed += _unscanned_bytes(Path(repo.repo_path), scanned)
    blobs = Path(repo.repo_path) / "blobs"
    for blob in strategy.blobs:
        if Path(blob).parent != blobs:
            raise LibraryError(
                f"a file of {model.name} links to {blob}, outside the repo's blobs folder "
                f"{blobs}; the library does not follow links out of the cache — remove that "
                "link by hand"
            )
    return DeletePlan(model, paths, freed, strategy)


def _is_model_weight(name: str) -> bool:
    """A file of a model (not a projector or a separate head file, which belong to one)."""
    return name.endswith(WEIGHT_SUFFIXES) and not (is_projector(name) or is_head_file(name))


def _unscanned_bytes(repo_folder: Path, blobs: set[Path]) -> int:
    """Bytes of the regular files a repo's folder holds besides the blobs the cache scan
    counted (refs, unfinished downloads): removing the whole folder frees them too."""
    total = 0
    for folder, _dirs, names in os.walk(repo_folder):
        for name in names:
            file = Path(folder) / name
            if file in blobs or file.is_symlink() or not file.is_file():
                continue
            total += file.lstat().st_size
    return total


def _leftover_message(model: LibraryModel, leftovers: list[Path]) -> str:
    shown = ", ".join(str(path) for path in leftovers[:3])
    more = f" and {len(leftovers) - 3} more" if len(leftovers) > 3 else ""
    return (
        f"{model.name} was only partly deleted: {shown}{more} could not be removed (permission "
        "denied, or in use by another program); check that you may write to the Hugging Face "
        f"cache {model.location.root}, close programs using the model, then delete it again"
    )


# -- models folder, grafted copies, opened files ------------------------------------------------


def _plan_plain_delete(model: LibraryModel) -> DeletePlan:
    targets = model_targets(model.description)
    if model.projectors and not other_models_beside(model.description, set(targets)):
        targets = (*targets, *(projector.path for projector in model.projectors))
    for target in targets:
        if target.is_symlink():
            raise LibraryError(
                f"{target} is a link to {os.readlink(target)}; the library does not delete "
                "what a link points to — delete that file itself, or remove the link in your "
                "file manager"
            )
        _check_inside(model, target)
    existing = tuple(target for target in targets if target.exists())
    return DeletePlan(model, existing, plain_bytes(existing))


def _check_inside(model: LibraryModel, target: Path) -> None:
    """Refuse a target outside the model's root (or one that is a root, home or ``/``)."""
    location = model.location
    if target.is_dir() and _is_protected_folder(target):
        raise LibraryError(
            f"{target} is a folder the library never deletes (a models folder, the home folder "
            "or a file-system root); delete the model's files in your file manager instead"
        )
    if location.kind == OPENED_FILE:
        return  # the user chose this file or folder themselves
    root = location.root
    assert root is not None
    if target == root or escape_problem(root, target.parent) is not None:
        raise LibraryError(
            f"{target} is not inside {root}, so the library will not delete it; delete it in "
            "your file manager if you are sure"
        )


def _is_protected_folder(folder: Path) -> bool:
    resolved = folder.resolve()
    return resolved == Path.home().resolve() or resolved.parent == resolved


def _failure_message(path: Path, exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        fix = "permission denied: check that you may write to its folder, or delete it yourself"
    elif exc.errno == errno.EBUSY or getattr(exc, "winerror", None) == 32:
        fix = "it is in use: unload it in Chat (or close the program using it) and try again"
    else:
        fix = f"{exc.strerror or exc}; check the disk, then try again"
    return f"cannot delete {path}: {fix}"
