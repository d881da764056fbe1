"""Which drafter belongs to a target, and whether a given drafter fits it — before anything loads.

A drafter (a separate MTP model: Gemma 4's ``-it-assistant``) is found for a target, in order:

1. beside it: a drafter file in the target's folder (unsloth ships ``mtp-gemma-4-26B-A4B-it.gguf``
   next to its quantisations), or, for a model folder, a sibling folder;
2. in an ``MTP/`` subfolder of that folder (how other GGUF repos ship it);
3. in a Hugging Face cache: the catalog's ``drafter_repo`` for the target's repo, then any repo
   named ``<base>-assistant…`` for the target repo's base slug (``google/gemma-4-E2B-it`` →
   ``google/gemma-4-E2B-it-assistant``; ``unsloth/gemma-4-E2B-it-GGUF`` →
   ``…/gemma-4-E2B-it-assistant-…``).

Only files whose architecture says drafter count (:mod:`app.engine.drafter.facts`), in the
target's format (a GGUF drafter for a GGUF target, a model folder for a model folder). A candidate
that does not fit — a drafter of another size (its ``backbone_hidden_size`` is not the target's
width), another vocabulary, other key/value shapes — is passed over with its one-line reason,
and the same reason refuses a drafter the user names (``--drafter FILE``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.engine.chat.sidecar import base_slug, repo_id_from_folder
from app.engine.download.quantisation import SPLIT_PART, is_projector, quant_label
from app.engine.drafter.facts import (
    DRAFTER_ARCHITECTURES,
    DRAFTER_MODEL_TYPES,
    ModelFacts,
    read_facts,
)
from app.engine.errors import DrafterError

MTP_FOLDER = "MTP"
ASSISTANT_SUFFIX = "-assistant"
TARGET_ARCHITECTURES = frozenset(
    name
    for targets in (*DRAFTER_ARCHITECTURES.values(), *DRAFTER_MODEL_TYPES.values())
    for name in targets
)


def pair_problem(target: ModelFacts, drafter: ModelFacts) -> str | None:
    """Why ``drafter`` cannot draft for ``target`` (one line naming both), None when it can."""
    name, target_name = drafter.path.name, target.path.name
    if not drafter.drafter:
        return f"{name} is not a drafter model (its architecture is {drafter.architecture})"
    families = DRAFTER_ARCHITECTURES.get(drafter.architecture) or DRAFTER_MODEL_TYPES.get(
        drafter.architecture, frozenset()
    )
    if target.architecture not in families:
        return (
            f"{name} is a {drafter.architecture} drafter, which drafts for "
            f"{'/'.join(sorted(families))} models, but {target_name} is {target.architecture}"
        )
    if target.note:
        return f"{target_name} cannot take a drafter: {target.note}"
    if drafter.width != target.width:
        return (
            f"{name} was made for a target of hidden size {drafter.width} but {target_name} has "
            f"{target.width}; use the drafter made for this model size"
        )
    if drafter.vocab_size and target.vocab_size and drafter.vocab_size != target.vocab_size:
        return (
            f"{name} drafts from a vocabulary of {drafter.vocab_size} tokens but {target_name} "
            f"has {target.vocab_size}; use the drafter made for this model"
        )
    for kind in ("full", "sliding"):
        wanted, offered = getattr(drafter, kind), getattr(target, kind)
        if wanted is not None and wanted != offered:
            return (
                f"{name} reads {kind}-attention keys of {wanted} (KV heads × head size) but "
                f"{target_name} has {offered or 'none'}; use the drafter made for this model"
            )
    return None


def check_pair(target: Path, drafter: Path) -> None:
    """Refuse (DrafterError, one line) a drafter that cannot draft for ``target``."""
    problem = pair_problem(read_facts(target), read_facts(drafter))
    if problem:
        raise DrafterError(problem)


@dataclass(frozen=True)
class DrafterMatch:
    """The drafter found for a target (None: none fits) and the candidates passed over."""

    path: Path | None
    passed_over: tuple[tuple[Path, str], ...] = ()

    @property
    def note(self) -> str | None:
        """Why no drafter was paired although candidates were found (None otherwise)."""
        if self.path is not None or not self.passed_over:
            return None
        return "; ".join(reason for _path, reason in self.passed_over)


def choose_drafter(target: Path, named: Path | None) -> DrafterMatch:
    """The drafter to load with the model at ``target``: ``named`` when given (refused with
    DrafterError, one line, when it does not fit), else the one beside it (its folder or
    ``MTP/``) for a model that takes one."""
    if named is None:
        return find_drafter(target)
    named = Path(named).expanduser()
    if not named.exists():
        raise DrafterError(f"the drafter {named} does not exist; pass a drafter model's path")
    check_pair(target, named)
    return DrafterMatch(named)


def may_take_drafter(architecture: str) -> bool:
    """Whether a model of this GGUF architecture, model type or transformers class may have a
    drafter (a cheap check before any file is read)."""
    name = architecture.lower()
    return name in TARGET_ARCHITECTURES or name.startswith("gemma4")


def takes_drafter(target: ModelFacts) -> bool:
    """Whether drafters exist for the target's architecture (only then is one looked for)."""
    return not target.drafter and target.architecture in TARGET_ARCHITECTURES


def find_drafter(
    target_path: Path,
    cache_dirs: Iterable[Path] = (),
    repo_id: str | None = None,
    catalog_drafter_repo: str | None = None,
) -> DrafterMatch:
    """The drafter for the target at ``target_path``: beside it, in ``MTP/``, then in a cache."""
    try:
        target = read_facts(target_path)
    except DrafterError:
        return DrafterMatch(None)
    if not takes_drafter(target):
        return DrafterMatch(None)
    passed_over: list[tuple[Path, str]] = []
    for place in _places(target_path, list(cache_dirs), repo_id, catalog_drafter_repo):
        fitting = []
        for candidate in place:
            try:
                facts = read_facts(candidate)
            except DrafterError:
                continue  # an unreadable file is the model picker's to report
            if not facts.drafter:
                continue  # another quantisation of the target, or another model
            problem = pair_problem(target, facts)
            if problem is None:
                fitting.append(candidate)
            else:
                passed_over.append((candidate, problem))
        if fitting:
            return DrafterMatch(_preferred(fitting, target_path), tuple(passed_over))
    return DrafterMatch(None, tuple(passed_over))


def _preferred(fitting: list[Path], target_path: Path) -> Path:
    """The candidate of the target's quantisation when there is one, else the first by name."""
    label = quant_label(target_path.name) if target_path.is_file() else ""
    same = [path for path in fitting if path.is_file() and quant_label(path.name) == label]
    return sorted(same or fitting)[0]


def _places(
    target_path: Path,
    caches: list[Path],
    repo_id: str | None,
    catalog_drafter_repo: str | None,
) -> Iterator[list[Path]]:
    """Candidate lists, best place first (each list is judged before the next is read)."""
    is_gguf = target_path.is_file()
    folder = target_path.parent
    if is_gguf:
        yield [path for path in _gguf_files(folder) if path != target_path]
        yield _gguf_files(folder / MTP_FOLDER)
    else:
        yield [entry for entry in _model_folders(folder) if entry != target_path]
        yield _model_folders(target_path / MTP_FOLDER, include_self=True)
    for repo_folder in _cached_drafter_repos(caches, repo_id, catalog_drafter_repo):
        for snapshot in _snapshots(repo_folder):
            if is_gguf:
                yield [*_gguf_files(snapshot), *_gguf_files(snapshot / MTP_FOLDER)]
            else:
                yield _model_folders(snapshot, include_self=True)


def _gguf_files(folder: Path) -> list[Path]:
    """First parts of the GGUF models in ``folder`` (projectors left out)."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.gguf")):
        split = SPLIT_PART.search(path.name)
        if is_projector(path.name) or (split and int(split.group(1)) != 1):
            continue
        found.append(path)
    return found


def _model_folders(folder: Path, include_self: bool = False) -> list[Path]:
    if not folder.is_dir():
        return []
    folders = [folder] if include_self else []
    folders += sorted(entry for entry in folder.iterdir() if entry.is_dir())
    return [entry for entry in folders if (entry / "config.json").is_file()]


def _cached_drafter_repos(
    caches: list[Path], repo_id: str | None, catalog_drafter_repo: str | None
) -> Iterator[Path]:
    named = []
    if catalog_drafter_repo:
        named.append(f"models--{catalog_drafter_repo.replace('/', '--')}")
    wanted = f"{base_slug(repo_id.split('/')[-1])}{ASSISTANT_SUFFIX}".lower() if repo_id else None
    for cache in caches:
        if not cache.is_dir():
            continue
        for name in named:
            if (cache / name).is_dir():
                yield cache / name
        if wanted is None:
            continue
        for candidate in sorted(cache.glob("models--*--*")):
            found = repo_id_from_folder(candidate.name)
            if found and found.split("/")[-1].lower().startswith(wanted):
                yield candidate


def _snapshots(repo_folder: Path) -> list[Path]:
    snapshots = repo_folder / "snapshots"
    if not snapshots.is_dir():
        return []
    return sorted(
        (entry for entry in snapshots.iterdir() if entry.is_dir()),
        key=lambda entry: entry.stat().st_mtime,
        reverse=True,
    )
