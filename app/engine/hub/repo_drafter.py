"""The drafter search shows for one repo, and whether it fits the repo's model.

:mod:`app.engine.hub.drafter_lookup` knows where drafters live and how to read a drafter repo;
this module decides for a search hit: a drafter in the repo itself first, then the catalog's
``drafter_repo``, then a ``<base>-assistant…`` repo on the Hub — the last two only for models
whose architecture takes drafters (Gemma 4). The fit is judged from what search already read:
both GGUF headers' first kilobytes, or both ``config.json`` files, through the same rules chat
pairs with (:func:`app.engine.drafter.pairing.pair_problem`), so ``get`` refuses a drafter of
another size before downloading anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from huggingface_hub.hf_api import ModelInfo

from app.engine.download.quantisation import gguf_files, is_head_file, is_projector
from app.engine.drafter.facts import ModelFacts, facts_from_config, facts_from_gguf
from app.engine.drafter.pairing import TARGET_ARCHITECTURES, pair_problem
from app.engine.errors import DrafterError
from app.engine.hub.drafter_lookup import (
    IN_REPO,
    DrafterHit,
    gguf_drafter_quantisations,
    gguf_group,
)
from app.engine.hub.hub_facts import HubFacts


@dataclass(frozen=True)
class RepoDrafterQuery:
    """A repo being described: its info, base models, format, model architecture (None when
    unknown), the GGUF trunk file read for it, and the drafter files found inside it."""

    info: ModelInfo
    bases: tuple[str, ...]
    gguf: bool
    architecture: str | None
    trunk: str | None
    in_repo: frozenset[str]


def trunk_file(sizes: Mapping[str, int]) -> str | None:
    """The first file of the smallest quantisation in the repo's largest group of GGUF files
    (the trunk: a drafter is far smaller; the file search reads for a head inside too);
    projectors and head files never count."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path in sizes:
        if path.lower().endswith(".gguf") and not (is_projector(path) or is_head_file(path)):
            groups.setdefault(gguf_group(path), []).append(path)
    if not groups:
        return None
    largest = max(groups.values(), key=lambda paths: sum(sizes[p] for p in paths))
    quantisations = gguf_files({path: sizes[path] for path in largest}).quantisations
    return quantisations[0].first_file if quantisations else None


def drafter_for_repo(
    query: RepoDrafterQuery, drafters: Mapping[str, str], facts: HubFacts
) -> DrafterHit | None:
    """The repo's drafter with its fit judged (None: no drafter)."""
    info = query.info
    if query.in_repo:
        sizes = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
        quants = gguf_drafter_quantisations(sizes, query.in_repo)
        hit: DrafterHit | None = DrafterHit(info.id, IN_REPO, quants, info.sha or "")
    elif query.architecture not in TARGET_ARCHITECTURES:
        return None
    else:
        named = next((drafters[r] for r in (info.id, *query.bases) if r in drafters), None)
        hit = facts.catalog_drafter(named) if named else None
        hit = hit or facts.hub_drafter(query.bases, info.id, query.gguf)
    if hit is None:
        return None
    return replace(hit, problem=_fit_problem(query, hit, facts))


def _fit_problem(query: RepoDrafterQuery, hit: DrafterHit, facts: HubFacts) -> str | None:
    try:
        target, drafter = _facts(query, hit, facts)
    except DrafterError:
        return None  # a header that cannot be read: judged again, on disk, after download
    if target is None or drafter is None:
        return None
    return pair_problem(target, drafter)


def _facts(
    query: RepoDrafterQuery, hit: DrafterHit, facts: HubFacts
) -> tuple[ModelFacts | None, ModelFacts | None]:
    info = query.info
    if query.gguf:
        if not (query.trunk and info.sha and hit.quantisations):
            return None, None
        drafter_file = hit.quantisations[0].files[0]
        target = facts.metadata(info.id, info.sha, query.trunk)
        drafter = facts.metadata(hit.repo_id, hit.commit, drafter_file)
        if not target or not drafter:
            return None, None
        return (
            facts_from_gguf(Path(query.trunk), target),
            facts_from_gguf(Path(drafter_file), drafter),
        )
    own = facts.config(info.id)
    config = own or next((c for b in query.bases if (c := facts.config(b))), None)
    drafter_config = facts.config(hit.repo_id)
    if config is None or drafter_config is None:
        return None, None
    return (
        facts_from_config(Path(info.id), config),
        facts_from_config(Path(hit.repo_id), drafter_config),
    )
