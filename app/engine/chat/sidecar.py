"""Pairing a model that lacks MTP heads with an MTP sidecar (``mtp.safetensors``) on disk.

Converted and quantised copies of a model lose its MTP heads; MTP Studio publishes them once per
base model as a sidecar repo ``<owner>/<base-slug>-mtp`` (no quant suffix). Given a model, the
sidecar is looked for, in order:

1. beside it: ``mtp.safetensors`` in the model's folder;
2. the catalog's ``mtp_sidecar_repo`` for the model's repo, when the chat was opened from an entry;
3. in a Hugging Face cache: any ``<owner>/<base-slug>-mtp`` repo, where the base slug is the
   model repo's name without its format/quant suffixes (``Qwen3.6-27B-GGUF`` → ``Qwen3.6-27B``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

SIDECAR_FILE = "mtp.safetensors"
SIDECAR_SUFFIX = "-mtp"
_FORMAT_SUFFIX = re.compile(
    r"[-_.](gguf|mlx|awq|gptq|exl2|fp8|fp16|bf16|int4|int8|mxfp4|nvfp4|\d+bit|\d+-bit|"
    r"q\d[a-z0-9_]*|iq\d[a-z0-9_]*|dwq)$",
    re.IGNORECASE,
)


def repo_id_of(path: Path, cache_dirs: Iterable[Path]) -> str | None:
    """``owner/name`` when ``path`` lies inside a Hugging Face cache's ``models--owner--name``."""
    resolved_caches = [cache.expanduser() for cache in cache_dirs]
    for parent in Path(path).parents:
        if parent.name.startswith("models--") and parent.parent in resolved_caches:
            return repo_id_from_folder(parent.name)
    return None


def repo_id_from_folder(folder_name: str) -> str | None:
    parts = folder_name.removeprefix("models--").split("--")
    return "/".join(parts) if len(parts) == 2 and all(parts) else None


def base_slug(repo_name: str) -> str:
    """The base model's slug: the repo name without format and quantisation suffixes."""
    slug = repo_name
    while True:
        shorter = _FORMAT_SUFFIX.sub("", slug)
        if shorter == slug or not shorter:
            return slug
        slug = shorter


def cached_sidecar(cache_dir: Path, repo_id: str) -> Path | None:
    """``mtp.safetensors`` of ``repo_id`` in the cache (its newest snapshot), if present."""
    folder = cache_dir / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    if not folder.is_dir():
        return None
    found = [snapshot / SIDECAR_FILE for snapshot in folder.iterdir()]
    existing = [file for file in found if file.is_file()]
    return max(existing, key=lambda file: file.stat().st_mtime) if existing else None


def find_sidecar(
    model_path: Path,
    repo_id: str | None,
    cache_dirs: Iterable[Path],
    catalog_sidecar_repo: str | None = None,
) -> Path | None:
    """The sidecar that belongs to the model at ``model_path``, or None."""
    folder = model_path if model_path.is_dir() else model_path.parent
    beside = folder / SIDECAR_FILE
    if beside.is_file():
        return beside
    caches = [cache for cache in cache_dirs if cache.is_dir()]
    if catalog_sidecar_repo:
        for cache in caches:
            found = cached_sidecar(cache, catalog_sidecar_repo)
            if found is not None:
                return found
    if repo_id is None:
        return None
    wanted = f"{base_slug(repo_id.split('/')[-1])}{SIDECAR_SUFFIX}".lower()
    for cache in caches:
        for candidate in sorted(cache.glob(f"models--*--*{SIDECAR_SUFFIX}")):
            sidecar_repo = repo_id_from_folder(candidate.name)
            if sidecar_repo and sidecar_repo.split("/")[-1].lower() == wanted:
                found = cached_sidecar(cache, sidecar_repo)
                if found is not None:
                    return found
    return None
