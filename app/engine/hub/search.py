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
(:mod:`app.engine.hub.sidecar_lookup`, looked up only when the catalog has none); none.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.hf_api import ModelInfo

from app.engine.catalog import CatalogEntry
from app.engine.chat.memory import ModelShape
from app.engine.chat.model_files import config_shape
from app.engine.download.quantisation import Quantisation, gguf_files
from app.engine.errors import HubError
from app.engine.hub.failures import hub_error
from app.engine.hub.fit import Fit, judge_fit
from app.engine.hub.gguf_peek import remote_mtp_blocks
from app.engine.hub.sidecar_lookup import find_hub_sidecar

GGUF = "gguf"
MLX = "mlx"
SAFETENSORS = "safetensors"
FORMATS = (GGUF, MLX, SAFETENSORS)
SORTS = {"downloads": "downloads", "recent": "last_modified"}
HEAD_INSIDE = "head inside"
SEPARATE_HEAD = "separate head file"
SIDECAR = "sidecar in catalog"
SIDECAR_ON_HUB = "sidecar on the Hub"
NO_HEAD = "none"
DEFAULT_LIMIT = 20
PARALLEL_REQUESTS = 4
HUB_FAILURES = (HfHubHTTPError, httpx2.HTTPError, OSError)
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
    projector: str | None = None
    """The projector ``get`` fetches with any quantisation (the smallest lossless one)."""

    @property
    def mtp(self) -> str:
        """The best MTP readiness among the quantisations."""
        order = (HEAD_INSIDE, SEPARATE_HEAD, SIDECAR, SIDECAR_ON_HUB, NO_HEAD)
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
) -> SearchResult:
    """Run ``query`` against ``endpoint``; every Hub failure is one :class:`HubError`."""
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
    facts = HubFacts(endpoint, token)
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        infos = list(pool.map(lambda model: _files_of(api, model, endpoint), listed))
        hits = tuple(
            pool.map(lambda info: describe_repo(info, sidecars, facts, memory_bytes), infos)
        )
    return SearchResult(query, hits, time.perf_counter() - started)


def describe_repo_id(
    repo_id: str,
    *,
    endpoint: str,
    token: str | None,
    sidecars: Mapping[str, str],
    memory_bytes: int | None,
) -> RepoHit:
    """One repo described as a search hit (what ``get`` and the download wizard's quantisation
    picker show); every Hub failure is one :class:`HubError`."""
    api = HfApi(endpoint=endpoint, token=token)
    try:
        info = api.model_info(repo_id, files_metadata=True)
    except HUB_FAILURES as exc:
        raise hub_error(exc, f"reading the files of {repo_id}", endpoint) from None
    return describe_repo(info, sidecars, HubFacts(endpoint, token), memory_bytes)


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


def repo_format(info: ModelInfo, sizes: Mapping[str, int]) -> str:
    tags = info.tags or []
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
) -> RepoHit:
    """What a repo (its ``model_info`` with file sizes) offers, quantisation by quantisation."""
    sizes = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
    bases = base_models(info.tags or [])
    fmt = repo_format(info, sizes)
    sidecar = next((sidecars[b] for b in (info.id, *bases) if b in sidecars), None)
    sidecar_kind = SIDECAR
    if sidecar is None and fmt in FORMATS:
        sidecar, sidecar_kind = facts.hub_sidecar(bases, info.id), SIDECAR_ON_HUB
    shape = facts.shape(info.id if "config.json" in sizes else None, bases)
    if fmt == GGUF:
        files = gguf_files(sizes)
        head_in_files = _heads_in_files(info, files.quantisations, facts)
        options = tuple(
            QuantOption(
                label=q.label,
                size=q.size,
                files=q.files,
                mtp=_gguf_mtp(
                    q.head_inside or head_in_files,
                    bool(files.head_files),
                    sidecar_kind if sidecar else NO_HEAD,
                ),
                fit=judge_fit(q.size, shape, memory_bytes),
            )
            for q in files.quantisations
        )
        projectors, projector = files.projectors, files.projector_for(repo_id=info.id)
    else:
        weights = tuple(sorted(p for p in sizes if p.endswith(".safetensors")))
        size = sum(sizes[p] for p in weights)
        own_heads = info.id in sidecars and fmt == SAFETENSORS
        mtp = HEAD_INSIDE if own_heads else sidecar_kind if sidecar else NO_HEAD
        bits = _BITS.search(info.id.rsplit("/", 1)[-1])
        label = f"{bits.group(1)}bit" if bits else "full"
        fit = judge_fit(size, shape, memory_bytes)
        options = (QuantOption(label, size, weights, mtp, fit),) if weights else ()
        projectors, projector = (), None
    return RepoHit(
        repo_id=info.id,
        format=fmt,
        downloads=int(info.downloads or 0),
        base_models=bases,
        quantisations=options,
        sidecar_repo=sidecar,
        projectors=projectors,
        projector=projector,
    )


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


class HubFacts:
    """What a search reads from the Hub besides listings: model shapes from config.json files
    (each repo read at most once per search), GGUF headers' first kilobytes, and published
    sidecars for base models (each set of bases looked up once per search)."""

    def __init__(self, endpoint: str, token: str | None) -> None:
        self._endpoint = endpoint
        self._token = token
        self._shapes: dict[str, ModelShape | None] = {}
        self._sidecars: dict[tuple[str, ...], str | None] = {}
        self._lock = threading.Lock()
        self._sidecar_lock = threading.Lock()

    def hub_sidecar(self, bases: tuple[str, ...], repo_id: str) -> str | None:
        """A sidecar published on the Hub for ``bases`` (by card, then by name), or None. A
        failed lookup counts as none found: the repo is still listed, only without a sidecar."""
        key = bases or (repo_id,)
        with self._sidecar_lock:
            if key not in self._sidecars:
                api = HfApi(endpoint=self._endpoint, token=self._token)
                try:
                    self._sidecars[key] = find_hub_sidecar(api, bases, repo_id)
                except HUB_FAILURES:
                    self._sidecars[key] = None
            return self._sidecars[key]

    def shape(self, own: str | None, bases: tuple[str, ...]) -> ModelShape | None:
        with self._lock:
            for repo_id in (own, *bases):
                if repo_id is None:
                    continue
                if repo_id not in self._shapes:
                    self._shapes[repo_id] = self._read(repo_id)
                if self._shapes[repo_id] is not None:
                    return self._shapes[repo_id]
        return None

    def mtp_blocks(self, repo_id: str, commit: str, path: str) -> int | None:
        return remote_mtp_blocks(repo_id, commit, path, endpoint=self._endpoint, token=self._token)

    def _read(self, repo_id: str) -> ModelShape | None:
        """The shape, or None when the repo has no readable config.json (the fit is then
        judged on file size alone and says so)."""
        try:
            path = hf_hub_download(
                repo_id, "config.json", endpoint=self._endpoint, token=self._token
            )
            config = json.loads(Path(path).read_text(encoding="utf-8"))
        except (*HUB_FAILURES, ValueError):  # no config (gated, missing, damaged): size alone
            return None
        if not isinstance(config, dict):
            return None
        text = config.get("text_config")
        shape = config_shape({**config, **(text if isinstance(text, dict) else {})})
        return shape if shape.embedding_length else None
