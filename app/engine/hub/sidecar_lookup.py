"""Finding a published MTP sidecar for a base model on the Hub, when the catalog names none.

Why: a user who searches for a model has usually not loaded a catalog that lists its sidecar, yet
someone may have published one. The publish flow (:mod:`app.engine.hub.card`) makes sidecar repos
that say what they are in two ways, both used here, best first:

- the model card: ``base_model`` is the release the head was extracted from and the tags include
  ``mtp-sidecar``, so the Hub tags the repo ``base_model:ORG/NAME`` and ``mtp-sidecar`` — one
  ``list_models`` query with both filters;
- the name: ``<owner>/<base-slug>-mtp`` (no quantisation suffix), for the base models and for the
  conversion's own slug — one ``list_models`` search per name, the exact name required.

Either way the repo must hold ``mtp.safetensors`` (the listing's file names say so), and a repo
owned by the base model's owner is preferred.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from huggingface_hub import HfApi
from huggingface_hub.hf_api import ModelInfo

from app.engine.chat.sidecar import SIDECAR_FILE, SIDECAR_SUFFIX, base_slug
from app.engine.hub.card import SIDECAR_TAGS

SIDECAR_TAG = SIDECAR_TAGS[0]
CANDIDATES = 20


def find_hub_sidecar(api: HfApi, bases: Sequence[str], repo_id: str) -> str | None:
    """The sidecar repo for ``repo_id`` (a conversion of ``bases``), or None; Hub errors pass."""
    owners = {base.split("/")[0].lower() for base in bases}
    for base in bases:
        listed = api.list_models(
            filter=[SIDECAR_TAG, f"base_model:{base}"], full=True, limit=CANDIDATES
        )
        if found := _best(listed, owners):
            return found
    for name in sidecar_names(bases, repo_id):
        listed = _named(api.list_models(search=name, full=True, limit=CANDIDATES))
        exact = [model for model in listed if model.id.split("/")[-1].lower() == name.lower()]
        if found := _best(exact, owners):
            return found
    return None


def sidecar_names(bases: Sequence[str], repo_id: str) -> list[str]:
    """``<base-slug>-mtp`` for each base model, then for the conversion's own name."""
    names: list[str] = []
    for repo in (*bases, repo_id):
        name = f"{base_slug(repo.split('/')[-1])}{SIDECAR_SUFFIX}"
        if name.lower() not in (known.lower() for known in names):
            names.append(name)
    return names


def _named(listed: Iterable[ModelInfo]) -> list[ModelInfo]:
    """The listed models whose id is an ``ORG/NAME`` (a hostile Hub's others are left out)."""
    return [model for model in listed if isinstance(model.id, str) and model.id.count("/") == 1]


def _best(listed: Iterable[ModelInfo], owners: set[str]) -> str | None:
    holding = [
        model.id
        for model in _named(listed)
        if any(sibling.rfilename == SIDECAR_FILE for sibling in model.siblings or [])
    ]
    holding.sort(key=lambda repo: repo.split("/")[0].lower() not in owners)
    return holding[0] if holding else None
