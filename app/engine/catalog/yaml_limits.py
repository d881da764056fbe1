"""Bounds a catalog YAML file must keep before and after parsing: size, nesting and aliases.

A catalog may come from anyone (``--catalog FILE``), and YAML has three ways to make a small
file cost without limit: an alias bomb (800 bytes of anchors that expand to 9^9 nodes once
validation walks them), deep flow nesting (ruamel's scanner is quadratic in it: 5 000 ``[`` took
over a minute, then a ``RecursionError``) and sheer size. :data:`MAX_CATALOG_BYTES` bounds what
is read at all; :func:`check_text` runs before ruamel sees the text (the deepest run of unclosed
``[``/``{``, counted over the raw text, so a bracket inside a quoted string counts too — no real
catalog has 64 of them open);
:func:`check_document` runs on the parsed document (expanded node count through aliases, a
cycle of aliases — ruamel reads a self-reference as null, but the walk must end whatever
it is given —, block nesting depth) with every shared node visited once. Each raises
``ValueError`` with a short reason for :class:`CatalogError` to carry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MAX_CATALOG_BYTES = 256 * 1024
"""About 30 times the bundled catalog (some 2 000 entries). ruamel's round-trip parser reads
50 to 200 KB a second on a busy 2-core machine, so this keeps a load to seconds."""
MAX_DEPTH = 64
"""A catalog entry nests three levels deep; anything past this is not a catalog."""
MAX_EXPANDED_NODES = 250_000
"""Values a catalog may hold once every alias is expanded (validation visits each). A file within
:data:`MAX_CATALOG_BYTES` holds at most about 131 000 values written out (two bytes each), so
only aliases can pass this."""

_BRACKET = re.compile(r"[\[\]{}]")


def check_text(text: str) -> None:
    """Refuse a text whose flow collections nest deeper than :data:`MAX_DEPTH`."""
    depth = 0
    for match in _BRACKET.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise ValueError(f"line {line} nests [ or {{ deeper than {MAX_DEPTH} levels")
        else:
            depth = max(depth - 1, 0)


def check_document(document: Any) -> None:
    """Refuse a document nested too deep, whose aliases loop, or expand past the limit."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        kids = _children(node)
        if children_done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size.get(id(kid), 1) for kid in kids)
            height[key] = 1 + max((height.get(id(kid), 0) for kid in kids), default=0)
            if size[key] > MAX_EXPANDED_NODES:
                raise ValueError(
                    f"its aliases expand to more than {MAX_EXPANDED_NODES} values "
                    "(an alias bomb); write the values out instead of repeating anchors"
                )
            if height[key] > MAX_DEPTH:
                raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise ValueError("an alias refers to a value that contains it (a loop)")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in kids if isinstance(kid, Mapping | list))


def _children(node: Any) -> list[Any]:
    if isinstance(node, Mapping):
        return [*node.keys(), *node.values()]
    if isinstance(node, list):
        return list(node)
    return []
