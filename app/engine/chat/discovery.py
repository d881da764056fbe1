"""Every model the chat window can offer: the bundled demo, downloads, and files the user opened.

Users complain when an app knows only one models folder, so the picker lists, in this order:

- the bundled demo model (``resources/models/demo-mtp.gguf``), so chat works out of the box,
  then the bundled vision demo (``resources/models/demo-vision/``, a small model with its
  projector), so pictures can be tried offline too;
- models downloaded through the app or by other Hugging Face tools: every GGUF and every model
  folder (config.json + safetensors) in the Hugging Face cache and in the models folder of the
  settings, whether laid out as a cache (``models--owner--name/snapshots/…``) or as plain files;
- GGUF files and folders the user opened by hand (remembered in the chat history).

Only headers are read (see :mod:`app.engine.chat.model_files`), and a model without MTP heads is
paired with a sidecar found beside it or in a cache (:mod:`app.engine.chat.sidecar`). A separate
drafter model (Gemma 4's assistant, recognised by its architecture) is never offered on its own:
it is paired with its target (:mod:`app.engine.drafter.pairing`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.engine.chat.model_files import (
    DEMO,
    DOWNLOADED,
    OPENED,
    ModelDescription,
    describe_model,
    split_parts,
)
from app.engine.chat.sidecar import SIDECAR_FILE, find_sidecar, repo_id_from_folder, repo_id_of
from app.engine.drafter.pairing import find_drafter, may_take_drafter
from app.engine.runtime.core.demo_model import (
    DEMO_MODEL_FILENAME,
    DEMO_VISION_FILENAME,
    DEMO_VISION_FOLDER,
    MODELS_DIR,
)

PLAIN_FOLDER_DEPTH = 4
_SKIPPED_PREFIXES = ("mmproj", "mtp-")
"""GGUF files that are not language models on their own: vision projectors (the library lists
them with the models of their folder, :mod:`app.engine.library.projectors`) and the separate MTP
head files (``mtp-*.gguf``) that some repos ship beside a trunk converted with ``--no-mtp``
(``mtp-studio get`` grafts them into the trunk). A drafter model under that name (unsloth's
``mtp-gemma-4-…``) is skipped here too but still found for its target, by its architecture
(:func:`with_drafter`); a drafter under any other name is dropped once its header is read."""


@dataclass(frozen=True)
class ModelSources:
    """Where to look. ``catalog_sidecars`` maps a model repo to its catalog sidecar repo,
    ``catalog_drafters`` to its catalog drafter repo."""

    model_roots: tuple[Path, ...]
    opened: tuple[Path, ...] = ()
    demo_dir: Path = MODELS_DIR
    catalog_sidecars: Mapping[str, str] = field(default_factory=dict)
    catalog_drafters: Mapping[str, str] = field(default_factory=dict)


def discover_models(sources: ModelSources) -> list[ModelDescription]:
    """Describe every model found, the demos first (text, then vision), then downloads by name,
    then opened files."""
    seen: set[Path] = set()
    found: list[ModelDescription] = []

    def add(description: ModelDescription) -> None:
        key = _identity(description.path)
        if description.is_drafter:
            return  # a drafter is listed with its target, never as a model of its own
        if key not in seen:
            seen.add(key)
            found.append(description)

    for demo in (
        sources.demo_dir / DEMO_MODEL_FILENAME,
        sources.demo_dir / DEMO_VISION_FOLDER / DEMO_VISION_FILENAME,
    ):
        if demo.is_file():
            add(describe_model(demo, DEMO))
    downloads = []
    for root in sources.model_roots:
        for path, repo_id in _model_paths(root):
            downloads.append(describe_model(path, DOWNLOADED).with_origin(DOWNLOADED, repo_id))
    for description in sorted(downloads, key=lambda d: (d.repo_id or "", d.name.lower())):
        add(description)
    for path in sources.opened:
        if path.exists():
            add(describe_model(path, OPENED))
    return [with_drafter(with_sidecar(description, sources), sources) for description in found]


def _identity(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def with_sidecar(description: ModelDescription, sources: ModelSources) -> ModelDescription:
    """``description`` with the sidecar found for it (unchanged when it has its own heads)."""
    if description.problem is not None or description.mtp_blocks > 0:
        return description
    repo_id = description.repo_id or repo_id_of(description.path, sources.model_roots)
    sidecar = find_sidecar(
        description.path,
        repo_id,
        sources.model_roots,
        sources.catalog_sidecars.get(repo_id or ""),
    )
    return replace(description, sidecar=sidecar) if sidecar is not None else description


def with_drafter(description: ModelDescription, sources: ModelSources) -> ModelDescription:
    """``description`` with the drafter found for it (unchanged when it takes none)."""
    if description.problem is not None or description.mtp_blocks > 0:
        return description
    if not may_take_drafter(description.architecture):
        return description  # most models: no second header read
    repo_id = description.repo_id or repo_id_of(description.path, sources.model_roots)
    match = find_drafter(
        description.path,
        sources.model_roots,
        repo_id,
        sources.catalog_drafters.get(repo_id or ""),
    )
    if match.path is None and match.note is None:
        return description
    if match.path is None:
        return replace(description, drafter_note=match.note)
    return replace(
        description,
        drafter=match.path,
        drafter_note=match.note,
        drafter_bytes=_size_on_disk(match.path),
        mtp_note=None,  # it drafts, with the drafter
    )


def paired_drafter(model_path: Path, model_roots: tuple[Path, ...]) -> Path | None:
    """The drafter the picker pairs with ``model_path`` (beside it, in ``MTP/``, or in a cache
    in ``model_roots`` by the ``<base>-assistant`` name), None when it takes none or none fits."""
    return with_drafter(describe_model(model_path), ModelSources(model_roots)).drafter


def _size_on_disk(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(file.stat().st_size for file in path.glob("*.safetensors"))


def paired_sidecar(model_path: Path, model_roots: tuple[Path, ...]) -> Path | None:
    """The sidecar the picker pairs with ``model_path``: None when it has its own MTP heads,
    cannot be read, or no sidecar is found beside it or in ``model_roots``."""
    return with_sidecar(describe_model(model_path), ModelSources(model_roots)).sidecar


def _model_paths(root: Path) -> Iterator[tuple[Path, str | None]]:
    """(model path, repo id) for every model under ``root`` (a cache, a plain folder, or both)."""
    if not root.is_dir():
        return
    for repo_folder in sorted(root.glob("models--*")):
        repo_id = repo_id_from_folder(repo_folder.name)
        for path in _newest_snapshot_models(repo_folder / "snapshots"):
            yield path, repo_id
    for path in _plain_models(root, PLAIN_FOLDER_DEPTH):
        yield path, None


def _newest_snapshot_models(snapshots: Path) -> list[Path]:
    """Models in a cached repo's snapshots; a file present in several keeps its newest copy."""
    if not snapshots.is_dir():
        return []
    newest: dict[str, tuple[float, Path]] = {}
    for snapshot in snapshots.iterdir():
        if not snapshot.is_dir():
            continue
        stamp = snapshot.stat().st_mtime
        for path in _plain_models(snapshot, PLAIN_FOLDER_DEPTH):
            relative = str(path.relative_to(snapshot))
            if relative not in newest or newest[relative][0] < stamp:
                newest[relative] = (stamp, path)
    return [path for _stamp, path in sorted(newest.values(), key=lambda item: str(item[1]))]


def _plain_models(folder: Path, depth: int) -> Iterator[Path]:
    """GGUF files and model folders under ``folder`` (hidden and cache folders are skipped)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return
    if _is_model_folder(entries):
        yield folder
    for entry in entries:
        if entry.name.startswith((".", "models--")):
            continue
        if entry.is_file() and _is_model_file(entry):
            yield entry
        elif entry.is_dir() and depth > 0:
            yield from _plain_models(entry, depth - 1)


def _is_model_file(path: Path) -> bool:
    name = path.name.lower()
    if not name.endswith(".gguf") or name.startswith(_SKIPPED_PREFIXES):
        return False
    return split_parts(path)[0] == path


def _is_model_folder(entries: Iterable[Path]) -> bool:
    names = {entry.name for entry in entries}
    weights = [name for name in names if name.endswith(".safetensors") and name != SIDECAR_FILE]
    return "config.json" in names and bool(weights)


def default_model_roots(models_dir: Path, hub_cache: Path) -> tuple[Path, ...]:
    """The settings' models folder and the Hugging Face cache (once if they are the same)."""
    roots = [models_dir.expanduser(), hub_cache.expanduser()]
    unique: list[Path] = []
    for root in roots:
        if all(os.path.realpath(root) != os.path.realpath(other) for other in unique):
            unique.append(root)
    return tuple(unique)
