"""Search the Hub for models and say, per repo, what each quantisation needs to run with MTP.

Why: a user who wants to chat knows a model's name, not the repo of a conversion, and cannot tell
from a file list which quantisation fits the machine or drafts with MTP. One search lists repos
with ``list_models`` (search text, a format tag, ``base_model:quantized:ORG/NAME`` for every
conversion of a base model, sorted by downloads or recency), then reads each repo's files with
their sizes (``model_info(files_metadata=True)``, one request per repo, a few at a time) and its
shape from a config.json (the repo's own, else its base model's, read once per search).

MTP readiness, best first: the head is inside the file (``…-mtp.gguf``; a GGUF whose header —
the first 64 KiB of the repo's smallest quantisation, one ranged read — declares
``nextn_predict_layers``; or the original release that the catalog extracts heads from); a
separate ``mtp-*.gguf`` head file sits beside the trunk; the catalog has a sidecar for the repo's
base model (``mtp-studio get`` grafts it); a sidecar for it is published on the Hub
(:mod:`app.engine.hub.sidecar_lookup`, looked up only when the catalog has none); a separate
drafter model (Gemma 4's assistant: in the repo, named by the catalog, or a ``<base>-assistant``
repo, :mod:`app.engine.hub.drafter_lookup`), which ``get`` fetches beside the trunk; none. A repo
that holds only a drafter is not listed: a drafter is not a model to chat with.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from huggingface_hub import HfApi
from huggingface_hub.hf_api import ModelInfo

from app.engine.catalog import CatalogEntry
from app.engine.download.quantisation import Quantisation, gguf_files
from app.engine.drafter.facts import is_drafter_architecture, is_drafter_config
from app.engine.errors import HubError
from app.engine.hub.drafter_lookup import DrafterHit, drafter_files
from app.engine.hub.failures import hub_error
from app.engine.hub.fit import Fit, judge_fit
from app.engine.hub.hub_facts import HUB_FAILURES, HubFacts, architecture_in
from app.engine.hub.repo_drafter import RepoDrafterQuery, drafter_for_repo, trunk_file

GGUF = "gguf"
MLX = "mlx"
SAFETENSORS = "safetensors"
FORMATS = (GGUF, MLX, SAFETENSORS)
SORTS = {"downloads": "downloads", "recent": "last_modified"}
HEAD_INSIDE = "head inside"
SEPARATE_HEAD = "separate head file"
DRAFTER = "separate drafter"
SIDECAR = "sidecar in catalog"
SIDECAR_ON_HUB = "sidecar on the Hub"
NO_HEAD = "none"
DEFAULT_LIMIT = 20
MAX_LIMIT = 500
MAX_LISTED_BYTES = 2**60
"""A file size above this (an exbibyte) is not a size a Hub can mean: the listing is broken."""
PARALLEL_REQUESTS = 4
_BITS = re.compile(r"(?<![A-Za-z0-9])(\d+)[-_]?bits?(?![A-Za-z0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class SearchQuery:
    """What to look for: text in the repo id, a format, a base model, an order, how many."""

    text: str = ""
    format: str = ""
    base: str = ""
    sort: str = "downloads"
    limit: int = DEFAULT_LIMIT

    def __post_init__(self) -> None:
        if self.format and self.format not in FORMATS:
            raise HubError(f"format {self.format!r} is unknown; use one of {', '.join(FORMATS)}")
        if self.sort not in SORTS:
            raise HubError(f"sort {self.sort!r} is unknown; use one of {', '.join(SORTS)}")
        if self.base and self.base.count("/") != 1:
            raise HubError(f"base {self.base!r} is not of the form ORG/NAME, e.g. Qwen/Qwen3.6-27B")
        if not (self.text or self.base):
            raise HubError("give a text to search for, or a base model with --base ORG/NAME")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise HubError(f"--limit {self.limit} is invalid: use 1 to {MAX_LIMIT} repos")

    def filters(self) -> list[str]:
        tags = [self.format] if self.format else []
        return [*tags, f"base_model:quantized:{self.base}"] if self.base else tags


@dataclass(frozen=True)
class QuantOption:
    """One quantisation a repo offers: what to pass to ``--quant``, its size, MTP, fit."""

    label: str
    size: int
    files: tuple[str, ...]
    mtp: str
    fit: Fit


@dataclass(frozen=True)
class RepoHit:
    repo_id: str
    format: str
    downloads: int
    base_models: tuple[str, ...]
    quantisations: tuple[QuantOption, ...]
    sidecar_repo: str | None
    """The sidecar repo for the base model (what ``get`` grafts): the catalog's, else one
    published on the Hub; None when there is neither."""
    projectors: tuple[str, ...]
    drafter: DrafterHit | None = None
    """The separate drafter model ``get`` fetches beside the trunk (Gemma 4), if one is found."""
    projector: str | None = None
    """The projector ``get`` fetches with any quantisation (the smallest lossless one)."""

    @property
    def mtp(self) -> str:
        """The best MTP readiness among the quantisations."""
        order = (HEAD_INSIDE, SEPARATE_HEAD, DRAFTER, SIDECAR, SIDECAR_ON_HUB, NO_HEAD)
        found = [q.mtp for q in self.quantisations] or [NO_HEAD]
        return min(found, key=order.index)

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo_id,
            "format": self.format,
            "downloads": self.downloads,
            "base_models": list(self.base_models),
            "mtp": self.mtp,
            "sidecar_repo": self.sidecar_repo,
            "projectors": list(self.projectors),
            "drafter": self.drafter.to_json() if self.drafter else None,
            "projector": self.projector,
            "quantisations": [
                {
                    "label": q.label,
                    "size": q.size,
                    "files": list(q.files),
                    "mtp": q.mtp,
                    "fit": q.fit.verdict,
                    "estimate_bytes": q.fit.estimate_bytes,
                    "context": q.fit.context,
                }
                for q in self.quantisations
            ],
        }


@dataclass(frozen=True)
class SearchResult:
    query: SearchQuery
    hits: tuple[RepoHit, ...]
    seconds: float


def catalog_sidecars(entries: Iterable[CatalogEntry]) -> dict[str, str]:
    """Base model → sidecar repo, from the catalog entries that have a sidecar; each entry's
    public conversions (``public_repos``) map to it too, for cards that name no base model."""
    found: dict[str, str] = {}
    for entry in entries:
        if entry.mtp_sidecar_repo:
            for repo in (entry.base_model, entry.source_model, *entry.public_repos):
                found.setdefault(repo, entry.mtp_sidecar_repo)
    return found


def search_models(
    query: SearchQuery,
    *,
    endpoint: str,
    token: str | None,
    sidecars: Mapping[str, str],
    memory_bytes: int | None,
    drafters: Mapping[str, str] | None = None,
) -> SearchResult:
    """Run ``query`` against ``endpoint``; every Hub failure is one :class:`HubError`.
    ``drafters``: the catalog's model repo → drafter repo (``catalog_drafters``)."""
    started = time.perf_counter()
    api = HfApi(endpoint=endpoint, token=token)
    try:
        listed = list(
            api.list_models(
                search=query.text or None,
                filter=query.filters() or None,
                sort=SORTS[query.sort],  # type: ignore[arg-type]
                limit=query.limit,
            )
        )
    except HUB_FAILURES as exc:
        what = f"searching {endpoint} for {query.text or query.base!r}"
        raise hub_error(exc, what, endpoint) from None
    listed = [model for model in listed if _is_repo_id(model.id)]
    facts = HubFacts(endpoint, token)
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        infos = list(pool.map(lambda model: _files_of(api, model, endpoint), listed))
        described = pool.map(
            lambda info: describe_repo(info, sidecars, facts, memory_bytes, drafters or {}), infos
        )
        hits = tuple(hit for hit in described if hit is not None)
    return SearchResult(query, hits, time.perf_counter() - started)


def describe_repo_id(
    repo_id: str,
    *,
    endpoint: str,
    token: str | None,
    sidecars: Mapping[str, str],
    memory_bytes: int | None,
    drafters: Mapping[str, str] | None = None,
) -> RepoHit:
    """One repo described as a search hit (what ``get`` and the download wizard's quantisation
    picker show); every Hub failure is one :class:`HubError`, and so is a repo that holds only
    a drafter model."""
    api = HfApi(endpoint=endpoint, token=token)
    try:
        info = api.model_info(repo_id, files_metadata=True)
    except HUB_FAILURES as exc:
        raise hub_error(exc, f"reading the files of {repo_id}", endpoint) from None
    hit = describe_repo(info, sidecars, HubFacts(endpoint, token), memory_bytes, drafters or {})
    if hit is None:
        raise HubError(
            f"{repo_id} holds a drafter model (Gemma 4's assistant), which drafts for another "
            "model and cannot chat on its own; get its target model instead — the drafter "
            "comes with it"
        )
    return hit


def _files_of(api: HfApi, listed: ModelInfo, endpoint: str) -> ModelInfo:
    try:
        return api.model_info(listed.id, files_metadata=True)
    except HUB_FAILURES as exc:
        raise hub_error(exc, f"reading the files of {listed.id}", endpoint) from None


def base_models(tags: Iterable[str]) -> tuple[str, ...]:
    """The ``ORG/NAME`` of every ``base_model:ORG/NAME`` tag."""
    found = []
    for tag in tags:
        parts = tag.split(":")
        if len(parts) == 2 and parts[0] == "base_model" and parts[1].count("/") == 1:
            found.append(parts[1])
    return tuple(found)


def listed_sizes(info: ModelInfo) -> dict[str, int]:
    """File name → size from a repo listing; an entry whose name is not text or whose size is
    not a plausible byte count is left out (a broken or hostile Hub's)."""
    sizes: dict[str, int] = {}
    for sibling in info.siblings or []:
        name, size = getattr(sibling, "rfilename", None), getattr(sibling, "size", None) or 0
        if isinstance(name, str) and name and _is_count(size, MAX_LISTED_BYTES):
            sizes[name] = size
    return sizes


def _is_repo_id(value: object) -> bool:
    """An ``ORG/NAME`` a Hub listing may give; anything else is left out of the results."""
    return isinstance(value, str) and value.count("/") == 1 and len(value) <= 200


def _is_count(value: object, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def _count(value: object) -> int:
    return value if _is_count(value, MAX_LISTED_BYTES) else 0  # type: ignore[return-value]


def _strings(values: object) -> list[str]:
    return [value for value in values if isinstance(value, str)] if isinstance(values, list) else []


def repo_format(info: ModelInfo, sizes: Mapping[str, int]) -> str:
    tags = _strings(info.tags)
    if any(path.endswith(".gguf") for path in sizes):
        return GGUF
    if MLX in tags or info.library_name == MLX:
        return MLX
    if any(path.endswith(".safetensors") for path in sizes):
        return SAFETENSORS
    return "other"


def describe_repo(
    info: ModelInfo,
    sidecars: Mapping[str, str],
    facts: HubFacts,
    memory_bytes: int | None,
    drafters: Mapping[str, str] | None = None,
) -> RepoHit | None:
    """What a repo (its ``model_info`` with file sizes) offers, quantisation by quantisation;
    None for a repo that holds only a drafter model."""
    sizes = listed_sizes(info)
    bases = base_models(_strings(info.tags))
    fmt = repo_format(info, sizes)
    sidecar = next((sidecars[b] for b in (info.id, *bases) if b in sidecars), None)
    sidecar_kind = SIDECAR
    if sidecar is None and fmt in FORMATS:
        sidecar, sidecar_kind = facts.hub_sidecar(bases, info.id), SIDECAR_ON_HUB
    own_config = sizes.get("config.json")
    shape = facts.shape(info.id if own_config is not None else None, bases, own_config)
    if fmt == GGUF:
        trunk = trunk_file(sizes)
        found = drafter_files(
            sizes, trunk, lambda path: facts.architecture(info.id, info.sha or "", path)
        )
        if trunk is None or (
            info.sha and is_drafter_architecture(facts.architecture(info.id, info.sha, trunk))
        ):
            return None if found or trunk is not None else _empty_hit(info, fmt, bases)
        files = gguf_files({path: size for path, size in sizes.items() if path not in found})
        head_in_files = _heads_in_files(info, files.quantisations, facts)
        architecture = facts.architecture(info.id, info.sha or "", trunk) if info.sha else None
        drafter = drafter_for_repo(
            RepoDrafterQuery(info, bases, True, architecture, trunk, found), drafters or {}, facts
        )
        otherwise = DRAFTER if drafter else sidecar_kind if sidecar else NO_HEAD
        options = tuple(
            QuantOption(
                label=q.label,
                size=q.size,
                files=q.files,
                mtp=_gguf_mtp(q.head_inside or head_in_files, bool(files.head_files), otherwise),
                fit=judge_fit(q.size, shape, memory_bytes),
            )
            for q in files.quantisations
        )
        projectors, projector = files.projectors, files.projector_for(repo_id=info.id)
    else:
        config = facts.config(info.id) if "config.json" in sizes else None
        if config is not None and is_drafter_config(config):
            return None
        own = config or next((c for b in bases if (c := facts.config(b))), None)
        query = RepoDrafterQuery(info, bases, False, architecture_in(own), None, frozenset())
        drafter = drafter_for_repo(query, drafters or {}, facts)
        weights = tuple(sorted(p for p in sizes if p.endswith(".safetensors")))
        size = sum(sizes[p] for p in weights)
        own_heads = info.id in sidecars and fmt == SAFETENSORS
        mtp = (
            HEAD_INSIDE
            if own_heads
            else DRAFTER
            if drafter
            else sidecar_kind
            if sidecar
            else NO_HEAD
        )
        bits = _BITS.search(info.id.rsplit("/", 1)[-1])
        label = f"{bits.group(1)}bit" if bits else "full"
        fit = judge_fit(size, shape, memory_bytes)
        options = (QuantOption(label, size, weights, mtp, fit),) if weights else ()
        projectors, projector = (), None
    return RepoHit(
        repo_id=info.id,
        format=fmt,
        downloads=_count(info.downloads),
        base_models=bases,
        quantisations=options,
        sidecar_repo=sidecar,
        projectors=projectors,
        drafter=drafter,
        projector=projector,
    )


def _empty_hit(info: ModelInfo, fmt: str, bases: tuple[str, ...]) -> RepoHit:
    return RepoHit(info.id, fmt, int(info.downloads or 0), bases, (), None, ())


def _heads_in_files(
    info: ModelInfo, quantisations: tuple[Quantisation, ...], facts: HubFacts
) -> bool:
    """Whether the repo's GGUFs carry the head though their names do not say so: the smallest
    quantisation's header is read (one conversion's files share the converter's choice)."""
    plain = [q for q in quantisations if not q.head_inside]
    if not plain or not info.sha:
        return False
    return bool(facts.mtp_blocks(info.id, info.sha, plain[0].first_file))


def _gguf_mtp(head_inside: bool, head_file: bool, otherwise: str) -> str:
    if head_inside:
        return HEAD_INSIDE
    return SEPARATE_HEAD if head_file else otherwise
