"""The ``cardData`` of a model: the YAML front matter of its README.md, read with the stdlib.

Why: the Hub returns a model card's metadata (license, base_model, tags) in ``model_info``; the
local hub is standard library only, so it reads the flat subset model cards use — ``key: value``
scalars, ``key: [a, b]`` and ``key:`` followed by ``- item`` lines. Anything fancier is skipped,
never guessed.
"""

from __future__ import annotations

import re

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):\s*(.*)$")


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def front_matter(readme: str) -> dict[str, object] | None:
    """The card metadata, or None when the README has no ``---`` front matter."""
    lines = readme.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        return None
    data: dict[str, object] = {}
    current_list: list[str] | None = None
    for line in lines[1:end]:
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and current_list is not None:
            current_list.append(_scalar(item.group(1)))
            continue
        key = _KEY.match(line)
        current_list = None
        if not key:
            continue
        name, value = key.group(1), key.group(2).strip()
        if value == "":
            current_list = []
            data[name] = current_list
        elif value.startswith("[") and value.endswith("]"):
            data[name] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            data[name] = _scalar(value)
    return data
