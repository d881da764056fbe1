"""Finding the separate drafter model (Gemma 4's assistant) for a repo that search lists.

Why: Gemma 4 drafts with a model of its own, shipped three ways — beside the trunk in the same
GGUF repo (unsloth's ``mtp-gemma-4-26B-A4B-it.gguf``, or an ``MTP/`` folder), in a repo of its
own named ``<base>-assistant`` (Google's ``google/gemma-4-E2B-it-assistant``; community
``…-it-assistant-MTP-GGUF`` repos), or named by the catalog (``drafter_repo``). A file is a
drafter because its architecture says so, never its name, so for a GGUF repo the first
kilobytes of one file of every group of files that are not the trunk's are read (one ranged read
per group: a group is the files that differ only by quantisation label and split part); for a
model folder repo the ``config.json`` says it (``model_type: gemma4_assistant``).

A drafter found this way is described by its quantisations (``get`` fetches one of them beside
the trunk's: the trunk's own label when the drafter has it, else the largest, drafters being
small), and where it was found, which search shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from huggingface_hub import HfApi
from huggingface_hub.hf_api import ModelInfo

from app.engine.catalog import CatalogEntry
from app.engine.chat.sidecar import base_slug
from app.engine.download.quantisation import QUANT_LABEL, SPLIT_PART, is_projector, quant_label
from app.engine.drafter.facts import is_drafter_architecture, is_drafter_config

IN_REPO = "in this repo"
CATALOG = "catalog"
BY_NAME = "on the Hub"
ASSISTANT = "-assistant"
CANDIDATES = 20


@dataclass(frozen=True)
class DrafterQuant:
    """One quantisation of a drafter: what ``get`` downloads beside the trunk."""

    label: str
    files: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class DrafterHit:
    """A drafter for a search hit: its repo, where it was found, its quantisations."""

    repo_id: str
    source: str
    quantisations: tuple[DrafterQuant, ...]
    commit: str = ""
    problem: str | None = None
    """Why it does not fit the repo's model (from both headers), None when it fits."""

    def describe(self) -> str:
        """The search listing's line: "drafter available" and where from (or why it does not
        fit)."""
        files = ", ".join(f for q in self.quantisations for f in q.files[:1])
        if self.source == IN_REPO:
            where = f"in this repo ({files})"
        elif self.source == CATALOG:
            where = f"{self.repo_id} (named by the catalog)"
        else:
            where = f"{self.repo_id} (found by name on the Hub)"
        if self.problem:
            return f"drafter {where} does not fit: {self.problem}"
        return f"drafter available {where}"

    def choose(self, trunk_label: str) -> DrafterQuant:
        """The trunk's own label when the drafter has it, else its largest quantisation."""
        for option in self.quantisations:
            if option.label.lower() == trunk_label.lower().removesuffix("-mtp"):
                return option
        return max(self.quantisations, key=lambda option: option.size)

    def to_json(self) -> dict[str, object]:
        return {
            "repo": self.repo_id,
            "source": self.source,
            "problem": self.problem,
            "quantisations": [
                {"label": q.label, "size": q.size, "files": list(q.files)}
                for q in self.quantisations
            ],
        }


def catalog_drafters(entries: Iterable[CatalogEntry]) -> dict[str, str]:
    """Model repo → drafter repo, for every entry with a ``drafter_repo`` (its source and base
    model, its own repo and its public conversions all map to it)."""
    found: dict[str, str] = {}
    for entry in entries:
        if entry.drafter_repo:
            for repo in (entry.base_model, entry.source_model, entry.hf_repo, *entry.public_repos):
                found.setdefault(repo, entry.drafter_repo)
    return found


def gguf_group(path: str) -> tuple[str, str]:
    """Files that differ only by quantisation label or split part share a group: (folder —
    ignored when it is itself a quantisation label such as ``BF16/`` —, name without both)."""
    folder, _, name = path.rpartition("/")
    stem = SPLIT_PART.sub("", name)
    stem = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    if QUANT_LABEL.fullmatch(folder):
        folder = ""
    return folder.lower(), QUANT_LABEL.sub("", stem).lower()


def drafter_files(
    sizes: Mapping[str, int],
    trunk_file: str | None,
    architecture_of: Callable[[str], str | None],
) -> frozenset[str]:
    """The GGUF files of a repo that are drafters: one file of every group other than
    ``trunk_file``'s is read (``architecture_of``: its ``general.architecture``, None if
    unknown); projectors are never read."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path in sorted(sizes):
        if path.lower().endswith(".gguf") and not is_projector(path):
            groups.setdefault(gguf_group(path), []).append(path)
    trunk_group = gguf_group(trunk_file) if trunk_file else None
    found: set[str] = set()
    for group, paths in groups.items():
        if group == trunk_group:
            continue
        first = [p for p in paths if not SPLIT_PART.search(p) or "-00001-of-" in p]
        probe = min(first or paths, key=lambda p: sizes[p])
        if is_drafter_architecture(architecture_of(probe)):
            found.update(paths)
    return frozenset(found)


def gguf_drafter_quantisations(
    sizes: Mapping[str, int], files: Iterable[str]
) -> tuple[DrafterQuant, ...]:
    by_label: dict[str, list[str]] = {}
    for path in sorted(files):
        label = quant_label(path.rsplit("/", 1)[-1])
        by_label.setdefault(label, []).append(path)
    options = [
        DrafterQuant(label, tuple(paths), sum(sizes[p] for p in paths))
        for label, paths in by_label.items()
    ]
    return tuple(sorted(options, key=lambda option: option.size))


def folder_drafter_quantisation(sizes: Mapping[str, int]) -> tuple[DrafterQuant, ...]:
    """A model-folder drafter repo is fetched whole (config, weights, tokenizer files)."""
    wanted = sorted(
        path
        for path in sizes
        if path.endswith((".safetensors", ".json", ".jinja", ".model", ".txt")) and "/" not in path
    )
    return (DrafterQuant("full", tuple(wanted), sum(sizes[p] for p in wanted)),) if wanted else ()


def drafter_repo_names(bases: Sequence[str], repo_id: str) -> list[str]:
    """``<base-slug>-assistant`` for each base model, then for the repo's own base slug: the
    prefix a drafter repo's name starts with (``…-assistant``, ``…-assistant-GGUF``, …)."""
    names: list[str] = []
    for repo in (*bases, repo_id):
        name = f"{base_slug(repo.split('/')[-1])}{ASSISTANT}"
        if name.lower() not in (known.lower() for known in names):
            names.append(name)
    return names


ArchitectureOf = Callable[[str, str, str], str | None]
"""(repo, commit, path) → the GGUF file's ``general.architecture`` (None when unknown)."""
ConfigOf = Callable[[str], Mapping[str, object] | None]
"""repo → its ``config.json`` (None when it has none or it cannot be read)."""


def describe_drafter_repo(
    info: ModelInfo, source: str, architecture_of: ArchitectureOf, config_of: ConfigOf
) -> DrafterHit | None:
    """``info`` (with file sizes) as a drafter repo, or None when it holds no drafter."""
    sizes = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
    if any(path.endswith(".gguf") for path in sizes):
        if not info.sha:
            return None
        found = drafter_files(sizes, None, lambda path: architecture_of(info.id, info.sha, path))
        options = gguf_drafter_quantisations(sizes, found) if found else ()
    elif "config.json" in sizes and is_drafter_config(config_of(info.id) or {}):
        options = folder_drafter_quantisation(sizes)
    else:
        options = ()
    return DrafterHit(info.id, source, options, info.sha or "") if options else None


def find_hub_drafter(
    api: HfApi,
    bases: Sequence[str],
    repo_id: str,
    gguf: bool,
    architecture_of: ArchitectureOf,
    config_of: ConfigOf,
) -> DrafterHit | None:
    """A drafter repo on the Hub named ``<base-slug>-assistant…`` in the hit's format (GGUF or
    not), the base model's owner's first; None when there is none. Hub errors pass."""
    owners = {repo.split("/")[0].lower() for repo in (*bases, repo_id)}
    for name in drafter_repo_names(bases, repo_id):
        listed = api.list_models(search=name, limit=CANDIDATES)
        named = [m.id for m in listed if m.id.split("/")[-1].lower().startswith(name.lower())]
        named.sort(key=lambda repo: repo.split("/")[0].lower() not in owners)
        for candidate in named:
            info = api.model_info(candidate, files_metadata=True)
            if any(s.rfilename.endswith(".gguf") for s in info.siblings or []) != gguf:
                continue
            hit = describe_drafter_repo(info, BY_NAME, architecture_of, config_of)
            if hit is not None:
                return hit
    return None
