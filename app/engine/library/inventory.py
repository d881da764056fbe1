"""The library: every model on disk, with what a user weighs before chatting with or deleting it.

The models are the ones the chat's picker finds (:func:`~app.engine.chat.discovery.discover_models`
— the bundled demo, the Hugging Face cache, the models folder, grafted copies and the files the
user opened); this module adds, per model, where it lives (cache repo and revision, models
folder, …), its format and quantisation, the bytes it really takes on disk, its MTP status (a
head inside, a paired sidecar, a sidecar the catalog knows but that is not downloaded, or none)
and whether it may be deleted. A separate drafter model (Gemma 4's assistant) is never a row of
its own: it is its target's MTP status. Nothing here loads a model: only headers are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.chat.discovery import ModelSources, default_model_roots, discover_models
from app.engine.chat.model_files import DEMO, GGUF, ModelDescription
from app.engine.chat.sidecar import repo_id_from_folder
from app.engine.library.disk import (
    CacheScan,
    blob_bytes,
    model_targets,
    plain_bytes,
    selected_files,
    selection_for,
)
from app.engine.library.formats import ModelFormat, model_format
from app.engine.library.projectors import Projector, projectors_of
from app.engine.runtime.core.demo_model import MODELS_DIR

BUNDLED = "bundled"
HF_CACHE = "hf-cache"
MODELS_FOLDER = "models-folder"
GRAFTED = "grafted"
OPENED_FILE = "opened"

HEAD = "head"
SIDECAR_PAIRED = "sidecar-paired"
DRAFTER_PAIRED = "drafter-paired"
SIDECAR_ON_HUB = "sidecar-on-hub"
NO_MTP = "none"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class LibraryRoots:
    """The folders the library looks in: the settings' models folder, the Hugging Face cache
    and the folder grafted copies are written to."""

    models_dir: Path
    hub_cache: Path
    grafted: Path

    @property
    def model_roots(self) -> tuple[Path, ...]:
        return (*default_model_roots(self.models_dir, self.hub_cache), self.grafted)


@dataclass(frozen=True)
class LibrarySources:
    """Where to look: the roots, the files the user opened (from the chat history), the demo's
    folder, and the catalog's model repo → sidecar repo mapping."""

    roots: LibraryRoots
    opened: tuple[Path, ...] = ()
    demo_dir: Path = MODELS_DIR
    catalog_sidecars: Mapping[str, str] = field(default_factory=dict)

    def model_sources(self) -> ModelSources:
        return ModelSources(
            model_roots=self.roots.model_roots,
            opened=self.opened,
            demo_dir=self.demo_dir,
            catalog_sidecars=dict(self.catalog_sidecars),
        )


@dataclass(frozen=True)
class Location:
    """Where a model lives. For the Hugging Face cache: the repo, the snapshot's revision (and
    the refs pointing at it), the repo's cache folder and the model's path inside the snapshot
    (``""`` when the model is the whole snapshot)."""

    kind: str
    root: Path | None = None
    repo_id: str | None = None
    revision: str | None = None
    refs: tuple[str, ...] = ()
    repo_folder: Path | None = None
    in_snapshot: str | None = None

    @property
    def label(self) -> str:
        """Short, for a table cell: the kind of place (and the ref and revision in a cache)."""
        if self.kind == HF_CACHE:
            refs = f"{', '.join(self.refs)}, " if self.refs else ""
            return f"Hugging Face cache ({refs}{(self.revision or '')[:7]})"
        return _PLACE_NAMES[self.kind]

    @property
    def detail(self) -> str:
        """Long, for a tooltip: the repo and full revision, or the folder."""
        if self.kind == HF_CACHE:
            return f"{self.repo_id} at revision {self.revision} in {self.root}"
        return f"{_PLACE_NAMES[self.kind]}: {self.root}" if self.root else _PLACE_NAMES[self.kind]


_PLACE_NAMES = {
    BUNDLED: "Bundled demo",
    MODELS_FOLDER: "Models folder",
    GRAFTED: "Grafted copies",
    OPENED_FILE: "Opened file",
}


@dataclass(frozen=True)
class MtpStatus:
    """``kind``: a head inside (``blocks``), a paired ``sidecar`` file, a paired ``drafter``
    model, a ``sidecar_repo`` the catalog knows but that is not downloaded, none, or unreadable
    (``note`` says why)."""

    kind: str
    blocks: int = 0
    sidecar: Path | None = None
    drafter: Path | None = None
    sidecar_repo: str | None = None
    note: str | None = None

    @property
    def label(self) -> str:
        if self.kind == HEAD:
            plural = "s" if self.blocks != 1 else ""
            return f"Head inside ({self.blocks} block{plural})"
        if self.kind == SIDECAR_PAIRED and self.sidecar is not None:
            return f"Sidecar paired: {self.sidecar}"
        if self.kind == DRAFTER_PAIRED and self.drafter is not None:
            return f"Drafter paired: {self.drafter}"
        if self.kind == SIDECAR_ON_HUB:
            return f"Sidecar not downloaded: {self.sidecar_repo}"
        if self.kind == UNREADABLE:
            return "Unreadable"
        return "None"


@dataclass(frozen=True)
class LibraryModel:
    """One model on disk as the library lists it."""

    name: str
    path: Path
    location: Location
    format: str
    quantisation: str
    size_bytes: int
    mtp: MtpStatus
    description: ModelDescription
    projectors: tuple[Projector, ...] = ()
    """Vision projectors (``mmproj-*.gguf``) beside a GGUF model, listed with it."""

    @property
    def deletable(self) -> bool:
        """Everything but the bundled demo model can be deleted."""
        return self.location.kind != BUNDLED

    @property
    def can_graft(self) -> bool:
        """A readable GGUF without a head, paired with a sidecar (the chat's graft offer)."""
        return (
            self.description.kind == GGUF
            and self.description.problem is None
            and self.mtp.kind == SIDECAR_PAIRED
        )


@dataclass(frozen=True)
class Inventory:
    """The models found (demo first, then downloads by name, then opened files) and where the
    library looked."""

    models: tuple[LibraryModel, ...]
    roots: tuple[Path, ...]

    @property
    def total_bytes(self) -> int:
        return sum(model.size_bytes for model in self.models)


def build_inventory(sources: LibrarySources) -> Inventory:
    """Every model the chat would offer, described for the library (reads headers only)."""
    roots = sources.roots.model_roots
    caches = CacheScan(roots)
    models = tuple(
        describe_for_library(description, sources, caches)
        for description in discover_models(sources.model_sources())
    )
    return Inventory(models, roots)


def describe_for_library(
    description: ModelDescription, sources: LibrarySources, caches: CacheScan
) -> LibraryModel:
    location = locate(description, sources.roots)
    found = model_format(description) if description.problem is None else ModelFormat("", "")
    return LibraryModel(
        name=_display_name(description, location),
        path=description.path,
        location=location,
        format=found.format or ("GGUF" if description.kind == GGUF else ""),
        quantisation=found.quantisation,
        size_bytes=size_on_disk(description, location, caches),
        mtp=mtp_status(description, location, sources.catalog_sidecars),
        description=description,
        projectors=projectors_of(description),
    )


def locate(description: ModelDescription, roots: LibraryRoots) -> Location:
    """Which of the library's places holds ``description.path``."""
    if description.origin == DEMO:
        return Location(BUNDLED, root=description.path.parent)
    path = description.path
    containing = [root for root in roots.model_roots if path.is_relative_to(root)]
    if not containing:
        return Location(OPENED_FILE)
    root = max(containing, key=lambda folder: len(folder.parts))
    inside = path.relative_to(root).parts
    if len(inside) >= 3 and inside[0].startswith("models--") and inside[1] == "snapshots":
        repo_folder = root / inside[0]
        revision = inside[2]
        return Location(
            HF_CACHE,
            root=root,
            repo_id=repo_id_from_folder(inside[0]),
            revision=revision,
            refs=_refs_to(repo_folder, revision),
            repo_folder=repo_folder,
            in_snapshot="/".join(inside[3:]),
        )
    return Location(GRAFTED if root == roots.grafted else MODELS_FOLDER, root=root)


def _refs_to(repo_folder: Path, revision: str) -> tuple[str, ...]:
    refs = repo_folder / "refs"
    if not refs.is_dir():
        return ()
    names = []
    for ref in sorted(refs.rglob("*")):
        try:
            if ref.is_file() and ref.read_text(encoding="utf-8").strip() == revision:
                names.append(ref.relative_to(refs).as_posix())
        except (OSError, UnicodeDecodeError):
            continue
    return tuple(names)


def size_on_disk(description: ModelDescription, location: Location, caches: CacheScan) -> int:
    """The bytes the model takes: its blobs in every cached revision, or its files elsewhere."""
    if location.kind == HF_CACHE and location.repo_folder is not None:
        scanned = caches.repo(location.repo_folder)
        if scanned is not None:
            snapshot = location.repo_folder / "snapshots" / (location.revision or "")
            selection = selection_for(description, snapshot)
            return blob_bytes(selected_files(scanned[1], selection))
        return description.size_bytes  # a repo the cache scan calls damaged: the files' sizes
    return plain_bytes(model_targets(description))


def mtp_status(
    description: ModelDescription, location: Location, catalog_sidecars: Mapping[str, str]
) -> MtpStatus:
    if description.problem is not None:
        return MtpStatus(UNREADABLE, note=description.problem)
    if description.mtp_blocks > 0:
        return MtpStatus(HEAD, blocks=description.mtp_blocks, note=description.mtp_note)
    if description.sidecar is not None:
        return MtpStatus(SIDECAR_PAIRED, sidecar=description.sidecar)
    if description.drafter is not None:
        return MtpStatus(DRAFTER_PAIRED, drafter=description.drafter)
    repo_id = description.repo_id or location.repo_id
    sidecar_repo = catalog_sidecars.get(repo_id or "")
    if sidecar_repo:
        return MtpStatus(SIDECAR_ON_HUB, sidecar_repo=sidecar_repo)
    return MtpStatus(NO_MTP, note=description.drafter_note or description.mtp_note)


def _display_name(description: ModelDescription, location: Location) -> str:
    if location.kind == HF_CACHE and location.repo_id:
        if location.in_snapshot:
            return f"{location.repo_id} · {location.in_snapshot}"
        return location.repo_id
    return description.name
