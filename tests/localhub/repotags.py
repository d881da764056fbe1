"""The tags the Hub derives for a model repo from its card and its files.

Why: searching the Hub filters on tags (``gguf``, ``mlx``, ``safetensors``,
``base_model:quantized:ORG/NAME``) that the Hub computes itself — from the card's ``tags``,
``library_name``, ``base_model`` and ``base_model_relation``, and from the files a repo holds. The
local hub derives them the same way, so ``model_info`` and ``/api/models`` agree on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def _as_list(value: object) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list):
        return [str(item) for item in value if item]
    return []


def repo_tags(card: Mapping[str, object] | None, paths: Iterable[str]) -> list[str]:
    """The tags of a repo with card metadata ``card`` and files ``paths``, in a stable order."""
    card = card or {}
    paths = list(paths)
    tags: list[str] = []

    def add(tag: str) -> None:
        if tag not in tags:
            tags.append(tag)

    library = card.get("library_name")
    if isinstance(library, str) and library:
        add(library)
    for tag in _as_list(card.get("tags")):
        add(tag)
    has_gguf = any(path.endswith(".gguf") for path in paths)
    if has_gguf:
        add("gguf")
    if any(path.endswith(".safetensors") for path in paths):
        add("safetensors")
    relation = card.get("base_model_relation")
    if not isinstance(relation, str) or not relation:
        relation = "quantized" if has_gguf or library == "mlx" else "finetune"
    for base in _as_list(card.get("base_model")):
        add(f"base_model:{base}")
        add(f"base_model:{relation}:{base}")
    return tags
