"""``mtp-studio catalog validate|list|show``: the catalog, readable and checkable without the GUI.

``--catalog FILE`` (repeatable) merges the given files; with none, the catalog shipped with the
app is used. Other commands that read the catalog take the same option through
:func:`add_catalog_option`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.engine.catalog import Catalog, CatalogEntry, Severity, load_catalog
from app.engine.errors import CatalogError


def add_catalog_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalog",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="catalog YAML file (repeatable; files are merged; default: the bundled catalog)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "catalog",
        help="check and inspect catalog files",
        description="Validate, list and show entries of the model catalog.",
    )
    actions = parser.add_subparsers(dest="catalog_command", metavar="ACTION", required=True)

    validate = actions.add_parser(
        "validate",
        help="report every error and warning",
        description="Print every problem; exit status 2 when there is an error (warnings pass).",
    )
    add_catalog_option(validate)
    validate.set_defaults(func=run_validate)

    listing = actions.add_parser("list", help="list the entries as a table")
    add_catalog_option(listing)
    listing.add_argument("--json", action="store_true", help="print a JSON array instead")
    listing.set_defaults(func=run_list)

    show = actions.add_parser("show", help="print one entry")
    show.add_argument("key", help="the entry's key (see `catalog list`)")
    add_catalog_option(show)
    show.add_argument("--json", action="store_true", help="print a JSON object instead")
    show.set_defaults(func=run_show)


def run_validate(args: argparse.Namespace) -> int:
    catalog = Catalog.open(args.catalog)
    problems = catalog.problems()
    for problem in problems:
        print(problem)
    errors = sum(1 for problem in problems if problem.severity is Severity.ERROR)
    warnings = len(problems) - errors
    summary = (
        f"{_count(len(catalog.rows()), 'entry', 'entries')} in "
        f"{_count(len(catalog.paths), 'file')}: "
        f"{_count(errors, 'error')}, {_count(warnings, 'warning')}"
    )
    if errors:
        raise CatalogError(f"catalog is invalid; {summary}")
    print(f"catalog OK; {summary}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    entries = load_catalog(args.catalog).entries()
    if args.json:
        print(json.dumps([_entry_json(entry) for entry in entries], indent=2, default=str))
        return 0
    rows = [("KEY", "SOURCE", "QUANT", "TIER", "SIDECAR")]
    rows += [(e.key, e.source_model, e.quant, e.tier, e.mtp_sidecar_repo or "-") for e in entries]
    print(_table(rows))
    return 0


def run_show(args: argparse.Namespace) -> int:
    entry = load_catalog(args.catalog).entry(args.key)
    if args.json:
        print(json.dumps(_entry_json(entry), indent=2, default=str))
        return 0
    fields = entry.to_fields()
    width = max(len(name) for name in [*fields, "base_model", "file"])
    for name, value in fields.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        print(f"{name:<{width}}  {shown}")
    print(f"{'base_model':<{width}}  {entry.base_model}")
    print(f"{'file':<{width}}  {entry.source_file}")
    return 0


def _entry_json(entry: CatalogEntry) -> dict[str, Any]:
    return {
        "fields": entry.to_fields(),
        "base_model": entry.base_model,
        "has_sidecar": entry.has_sidecar,
        "file": str(entry.source_file),
    }


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
