"""The models ``serve`` can answer with: the Models page's inventory, each with an id and the
short names a request may use instead.

``serve`` without ``--model`` serves the library (docs/server-api.md#models): the bundled demo,
the Hugging Face cache, the models folder and the grafted copies — exactly what the Models page
lists (:func:`~app.engine.library.inventory.build_inventory`), with sidecars and drafters paired
and never listed on their own. Files the user opened by hand in the chat are not served: the
server offers what lives in the model folders.

An id is stable and unique: the demo's file stem (``demo-mtp``), a cached repo's id with the
file's path inside the snapshot (``owner/Model-GGUF/Model-Q4_K_M.gguf``; the repo id alone for a
model folder that is the whole snapshot), a path relative to the models folder, or
``grafted/NAME`` for a grafted copy. Short names — the file name, its stem, the repo's name,
``repo:QUANT`` as Ollama and LM Studio write it — are matched without regard to case; a short
name that several models share picks none (:mod:`.names`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from app.engine.chat.discovery import with_drafter, with_sidecar
from app.engine.chat.model_files import GGUF, ModelDescription, describe_model
from app.engine.errors import ServerError
from app.engine.library.disk import CacheScan
from app.engine.library.inventory import (
    BUNDLED,
    DRAFTER_PAIRED,
    GRAFTED,
    HEAD,
    HF_CACHE,
    OPENED_FILE,
    SIDECAR_PAIRED,
    LibraryModel,
    LibrarySources,
    build_inventory,
    describe_for_library,
)

MTP_HEAD = "head"
MTP_SIDECAR = "sidecar"
MTP_DRAFTER = "drafter"
MTP_NONE = "none"
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")


@dataclass(frozen=True)
class ServableModel:
    """One model a request may name. ``mtp``: how it drafts — ``head`` (inside the file),
    ``sidecar`` or ``drafter`` (paired beside it) or ``none``; ``mtp_detail`` the head's blocks
    or the paired file, ``mtp_note`` why it would decode plainly."""

    id: str
    path: Path
    names: tuple[str, ...]
    format: str
    quantisation: str
    size_bytes: int
    mtp: str
    mtp_detail: str
    mtp_note: str | None
    description: ModelDescription
    projector: Path | None = None
    created: int = 0

    @property
    def is_gguf(self) -> bool:
        return self.description.kind == GGUF

    @property
    def sidecar(self) -> Path | None:
        return self.description.sidecar

    @property
    def architecture(self) -> str:
        return self.description.architecture


@dataclass(frozen=True)
class Catalogue:
    """The servable models, in the library's order (demo first, then downloads by name), and
    the ones found on disk that cannot be served here (name → why)."""

    models: tuple[ServableModel, ...]
    unservable: tuple[tuple[str, str], ...] = ()

    def by_id(self, model_id: str) -> ServableModel | None:
        return next((model for model in self.models if model.id == model_id), None)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(model.id for model in self.models)


def library_catalogue(sources: LibrarySources) -> Catalogue:
    """Every model of the library that this machine can run (reads headers only)."""
    inventory = build_inventory(sources)
    served, unservable = [], []
    for model in inventory.models:
        if model.location.kind == OPENED_FILE:
            continue  # a file opened by hand in the chat: not one of the model folders
        model_id = library_id(model)
        if model.description.runnable:
            served.append(servable(model, model_id))
        else:
            why = model.description.problem or model.description.runnable_reason or "unreadable"
            unservable.append((model_id, why))
    return Catalogue(tuple(_unique(served)), tuple(unservable))


def pinned_catalogue(path: Path, sources: LibrarySources) -> Catalogue:
    """The one model ``serve --model`` runs, under its file stem (or folder name), with the
    sidecar or drafter the library would pair with it; a model that cannot be read is refused
    with the reader's reason."""
    model_sources = sources.model_sources()
    description = with_drafter(with_sidecar(describe_model(path), model_sources), model_sources)
    if description.problem is not None:
        raise ServerError(f"--model {path}: {description.problem}")
    model = describe_for_library(description, sources, CacheScan(()))
    model_id = path.stem if path.suffix == ".gguf" else path.name
    return Catalogue((servable(model, model_id),))


def library_id(model: LibraryModel) -> str:
    """The model's id: see the module's docstring."""
    location = model.location
    if location.kind == BUNDLED:
        return model.path.stem
    if location.kind == HF_CACHE and location.repo_id:
        inside = location.in_snapshot
        return f"{location.repo_id}/{inside}" if inside else location.repo_id
    if location.root is not None:
        relative = model.path.relative_to(location.root).as_posix()
        return f"grafted/{relative}" if location.kind == GRAFTED else relative
    return model.path.name


def servable(model: LibraryModel, model_id: str) -> ServableModel:
    mtp, detail = _mtp_of(model)
    try:
        created = int(model.path.stat().st_mtime)
    except OSError:
        created = 0
    return ServableModel(
        id=model_id,
        path=model.path,
        names=_short_names(model, model_id),
        format=model.format,
        quantisation=model.quantisation,
        size_bytes=model.size_bytes,
        mtp=mtp,
        mtp_detail=detail,
        mtp_note=model.mtp.note if mtp == MTP_NONE else model.description.mtp_note,
        description=model.description,
        projector=model.projectors[0].path if model.projectors else None,
        created=created,
    )


def _mtp_of(model: LibraryModel) -> tuple[str, str]:
    status = model.mtp
    if status.kind == HEAD:
        plural = "s" if status.blocks != 1 else ""
        return MTP_HEAD, f"{status.blocks} block{plural} inside"
    if status.kind == SIDECAR_PAIRED and status.sidecar is not None:
        return MTP_SIDECAR, str(status.sidecar)
    if status.kind == DRAFTER_PAIRED and status.drafter is not None:
        return MTP_DRAFTER, str(status.drafter)
    return MTP_NONE, ""


def _short_names(model: LibraryModel, model_id: str) -> tuple[str, ...]:
    """The names besides the id that pick this model when no other model has them."""
    names: list[str] = []
    leaf = model.path.name
    stem = _SPLIT_SUFFIX.sub("", model.path.stem) if model.path.suffix == ".gguf" else leaf
    names += [leaf, stem]
    repo_id = model.location.repo_id
    if repo_id:
        repo_name = repo_id.split("/")[-1]
        names += [repo_id, repo_name]
        label = model.quantisation
        if label and " " not in label:
            names += [f"{repo_id}:{label}", f"{repo_name}:{label}"]
    return tuple(dict.fromkeys(name for name in names if name and name != model_id))


def _unique(models: list[ServableModel]) -> list[ServableModel]:
    """One model per id (the first found: a models folder inside the cache lists a file once)."""
    seen: set[str] = set()
    kept = []
    for model in models:
        if model.id not in seen:
            seen.add(model.id)
            kept.append(model)
    return kept
