"""The merged catalog: several YAML files read as one list of entries, validated and edited.

Users keep their own catalog files next to the default one; the app treats them as one catalog in
which keys, output names and repos must be unique. Two ways in: :meth:`Catalog.open` reads files
even when they have problems (the GUI shows them inline per row), :func:`load_catalog` reads them
for use and raises :class:`CatalogError` on any error.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.engine.catalog.crosscheck import LocatedFields, cross_entry_problems
from app.engine.catalog.entry import CatalogEntry
from app.engine.catalog.problems import Problem, errors_only
from app.engine.catalog.rules import parse_entry, validate_entry
from app.engine.catalog.yamlfile import CatalogFile
from app.engine.errors import CatalogError

_DEFAULT_CATALOG = Path(__file__).resolve().parents[3] / "resources" / "catalog" / "default.yaml"


def default_catalog_path() -> Path:
    """The catalog shipped with the app (``resources/catalog/default.yaml``).

    ``resources/`` sits beside the ``app`` package both in the source tree (editable install) and
    in an installed wheel, so one path relative to this module finds it in both.
    """
    if not _DEFAULT_CATALOG.is_file():
        raise CatalogError(
            f"the default catalog is missing at {_DEFAULT_CATALOG}; reinstall mtp-studio or "
            "pass a catalog file with --catalog FILE"
        )
    return _DEFAULT_CATALOG


class Catalog:
    """Catalog files merged in the order given; earlier files win when reporting duplicates."""

    def __init__(self, files: Sequence[CatalogFile]) -> None:
        self._files = list(files)

    @classmethod
    def open(cls, paths: Sequence[Path] | None = None) -> Catalog:
        """Read ``paths`` (the default catalog when none), however many problems they have."""
        chosen = list(paths) if paths else [default_catalog_path()]
        return cls([CatalogFile.read(Path(path)) for path in chosen])

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(catalog_file.path for catalog_file in self._files)

    def rows(self) -> list[LocatedFields]:
        """Every well-formed entry of every file, in order, as raw fields with their location."""
        return [row for catalog_file in self._files for row in catalog_file.rows()]

    def problems(self) -> list[Problem]:
        """Every error and warning: file structure, each entry, then across entries and files."""
        problems = [p for catalog_file in self._files for p in catalog_file.structure_problems()]
        rows = self.rows()
        for row in rows:
            problems.extend(validate_entry(row.fields, row.location))
        problems.extend(cross_entry_problems(rows))
        return problems

    def check_candidate(
        self, fields: Mapping[str, Any], replacing: str | None = None
    ) -> list[Problem]:
        """Problems of an entry being edited, as if it replaced entry ``replacing`` (or were new).

        This is the as-you-type check of the GUI's entry editor: the entry's own rules plus
        clashes with every other entry (duplicate key, output name or repo, sidecar conflicts).
        """
        others = [row for row in self.rows() if row.key != replacing]
        if replacing is not None:
            location = self._row(replacing).location
        elif self._files:
            location = self._files[-1].next_location()
        else:
            raise CatalogError("the catalog has no file to add an entry to; open a catalog file")
        candidate = LocatedFields(location, dict(fields))
        problems = validate_entry(candidate.fields, location) + cross_entry_problems(
            [*others, candidate]
        )
        return [p for p in problems if (p.file, p.index) == (location.file, location.index)]

    def entries(self) -> tuple[CatalogEntry, ...]:
        """All entries; raise :class:`CatalogError` listing every error if there is any."""
        self.raise_for_errors()
        return tuple(
            parse_entry(row.fields, row.location.file, row.location) for row in self.rows()
        )

    def entry(self, key: str) -> CatalogEntry:
        """The entry with ``key``; an unknown key raises :class:`CatalogError` with a suggestion."""
        for entry in self.entries():
            if entry.key == key:
                return entry
        raise CatalogError(self._unknown_key_message(key))

    def replace_entry(self, key: str, entry: CatalogEntry) -> None:
        """Put ``entry`` in place of the entry with ``key`` (the key itself may change).

        Comments, field order and unknown fields that ``entry`` still carries are kept. The change
        is in memory until :meth:`save`.
        """
        row = self._row(key)
        self._file_of(row).set_entry(_index(row), entry.to_fields())

    def add_entry(self, entry: CatalogEntry, file: Path) -> None:
        """Append ``entry`` to the catalog file ``file`` (one of :attr:`paths`)."""
        for catalog_file in self._files:
            if catalog_file.path == Path(file):
                catalog_file.append_entry(entry.to_fields())
                return
        raise CatalogError(
            f"{file} is not one of this catalog's files ({', '.join(map(str, self.paths))}); "
            "open it with the catalog first"
        )

    def remove_entry(self, key: str) -> None:
        row = self._row(key)
        self._file_of(row).remove_entry(_index(row))

    def save(self) -> list[Path]:
        """Save every modified file atomically; refuse while the catalog has errors.

        Returns the paths written. A catalog with errors cannot be loaded for use, so saving one
        would only move the problem to the next start.
        """
        self.raise_for_errors()
        written = []
        for catalog_file in self._files:
            if catalog_file.modified:
                catalog_file.save()
                written.append(catalog_file.path)
        return written

    def raise_for_errors(self) -> None:
        errors = errors_only(self.problems())
        if errors:
            listing = "\n".join(f"  {problem}" for problem in errors)
            raise CatalogError(
                f"the catalog has {len(errors)} error(s); fix them and try again "
                f"(`mtp-studio catalog validate` lists them):\n{listing}"
            )

    def _row(self, key: str) -> LocatedFields:
        for row in self.rows():
            if row.key == key:
                return row
        raise CatalogError(self._unknown_key_message(key))

    def _file_of(self, row: LocatedFields) -> CatalogFile:
        return next(f for f in self._files if f.path == row.location.file)

    def _unknown_key_message(self, key: str) -> str:
        known = [row.key for row in self.rows() if row.key]
        close = difflib.get_close_matches(key, known, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        files = ", ".join(str(path) for path in self.paths)
        return (
            f"no catalog entry with key {key!r} in {files}; {hint}"
            "run `mtp-studio catalog list` to see every key"
        )


def _index(row: LocatedFields) -> int:
    if row.location.index is None:
        raise ValueError(f"catalog row without a position: {row.describe()}")
    return row.location.index


def load_catalog(paths: Sequence[Path] | None = None) -> Catalog:
    """Read catalog files for use: any error raises :class:`CatalogError` listing them all."""
    catalog = Catalog.open(paths)
    catalog.raise_for_errors()
    return catalog
