"""The model catalog (docs/catalog.md): YAML files listing what to publish and where.

Import from here; the submodules are an implementation detail:

- :func:`load_catalog` / :meth:`Catalog.open` read and merge catalog files,
- :meth:`Catalog.problems` and :func:`validate_entry` report :class:`Problem` records,
- :meth:`Catalog.replace_entry` / :meth:`Catalog.add_entry` / :meth:`Catalog.save` edit them.
"""

from app.engine.catalog.catalog import Catalog, default_catalog_path, load_catalog
from app.engine.catalog.entry import (
    KNOWN_FIELDS,
    MTP_FIELDS,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    CatalogEntry,
    sidecar_repo_for,
)
from app.engine.catalog.problems import EntryLocation, Problem, Severity
from app.engine.catalog.rules import is_repo_id, parse_entry, quant_marker, validate_entry

__all__ = [
    "KNOWN_FIELDS",
    "MTP_FIELDS",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "Catalog",
    "CatalogEntry",
    "EntryLocation",
    "Problem",
    "Severity",
    "default_catalog_path",
    "is_repo_id",
    "load_catalog",
    "parse_entry",
    "quant_marker",
    "sidecar_repo_for",
    "validate_entry",
]
