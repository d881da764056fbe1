"""One catalog file kept as a round-trip YAML document, so saving never loses what a person wrote.

ruamel.yaml's round-trip mode keeps comments, key order, quoting and unknown fields; edits are
applied in place to the parsed document rather than by re-serialising plain dicts, and a save goes
to a temporary file in the same folder that replaces the original only once it is complete. The
text is parsed once, within the bounds of :mod:`app.engine.catalog.yaml_limits` (size, nesting,
alias expansion), so a hostile catalog is a one-line error, not a minute of work or a traceback.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML, YAMLError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.util import load_yaml_guess_indent

from app.engine.catalog.crosscheck import LocatedFields
from app.engine.catalog.problems import EntryLocation, Problem, Severity
from app.engine.catalog.yaml_limits import (
    MAX_CATALOG_BYTES,
    MAX_DEPTH,
    check_document,
    check_text,
)
from app.engine.errors import CatalogError

_MODELS = "models"


class CatalogFile:
    """A parsed catalog file: its ``models:`` entries, editable in place, savable atomically."""

    def __init__(self, path: Path, document: Any, yaml: YAML) -> None:
        self.path = path
        self._document = document
        self._yaml = yaml
        self.modified = False

    @classmethod
    def read(cls, path: Path) -> CatalogFile:
        """Parse ``path``; raise :class:`CatalogError` if it cannot be read or is not YAML."""
        try:
            text = _read_bounded(path)
        except FileNotFoundError:
            raise CatalogError(
                f"catalog file {path} does not exist; check the path given to --catalog"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CatalogError(f"cannot read catalog file {path}: {exc}") from exc
        try:
            check_text(text)
            document, yaml = _load_round_trip(text)
            check_document(document)
        except RecursionError:
            raise CatalogError(
                f"{path} is refused: it nests deeper than {MAX_DEPTH} levels; a catalog entry "
                "needs three"
            ) from None
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            problem = getattr(exc, "problem", None) or str(exc)
            raise CatalogError(
                f"{where}: not valid YAML ({problem}); fix the syntax at that line"
            ) from exc
        except ValueError as exc:
            raise CatalogError(f"{path} is refused: {exc}") from None
        return cls(path, document, yaml)

    def structure_problems(self) -> list[Problem]:
        """Problems with the file's shape: no ``models:`` list, or entries that are not mappings."""
        location = EntryLocation(file=self.path)
        if not isinstance(self._document, CommentedMap) or _MODELS not in self._document:
            return [
                location.problem(
                    Severity.ERROR,
                    None,
                    _MODELS,
                    "the file has no `models:` list; start it with `models:` followed by "
                    "entries like `- key: ...`",
                )
            ]
        models = self._document[_MODELS]
        if models is None:
            return []
        if not isinstance(models, CommentedSeq):
            return [
                location.problem(
                    Severity.ERROR,
                    None,
                    _MODELS,
                    "`models:` must be a list of entries, each starting with `- key: ...`",
                )
            ]
        return [
            EntryLocation(self.path, index, _line_of(models, index)).problem(
                Severity.ERROR,
                None,
                None,
                "this entry is not a mapping of fields; write it as `- key: ...` followed by "
                "`source_model: ...` and the other fields",
            )
            for index, node in enumerate(models)
            if not isinstance(node, CommentedMap)
        ]

    def rows(self) -> list[LocatedFields]:
        """Every well-formed entry as plain Python values with its location."""
        return [
            LocatedFields(self._location(index, node), to_plain(node))
            for index, node in enumerate(self._models())
            if isinstance(node, CommentedMap)
        ]

    def next_location(self) -> EntryLocation:
        """Where an entry appended to this file would sit."""
        return EntryLocation(file=self.path, index=len(self._models()))

    def set_entry(self, index: int, fields: Mapping[str, Any]) -> None:
        """Make entry ``index`` hold exactly ``fields``, keeping comments and untouched values."""
        node = self._models()[index]
        for name in [name for name in node if name not in fields]:
            del node[name]
        for name, value in fields.items():
            if name not in node or node[name] != value:
                node[name] = _like(node.get(name), value)
        self.modified = True

    def append_entry(self, fields: Mapping[str, Any]) -> None:
        if self._document is None:
            self._document = CommentedMap()
        if isinstance(self._document, CommentedMap) and self._document.get(_MODELS) is None:
            self._document[_MODELS] = CommentedSeq()
        if self.structure_problems():
            raise CatalogError(
                f"cannot add an entry to {self.path}: {self.structure_problems()[0].message}"
            )
        self._models().append(CommentedMap((name, _like(None, v)) for name, v in fields.items()))
        self.modified = True

    def remove_entry(self, index: int) -> None:
        del self._models()[index]
        self.modified = True

    def save(self) -> None:
        """Write the document to a temporary file beside the original, then swap it in.

        If anything fails (a value YAML cannot represent, a full disk), the temporary file is
        removed and the original is left exactly as it was.
        """
        target = self.path.resolve()  # a symlinked catalog keeps its link; the target changes
        temp_path: Path | None = None
        try:
            descriptor, temp_name = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
            )
            temp_path = Path(temp_name)
            with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as stream:
                self._yaml.dump(self._document, stream)
                stream.flush()
                os.fsync(stream.fileno())
            if target.exists():
                os.chmod(temp_path, target.stat().st_mode & 0o7777)
            os.replace(temp_path, target)
        except Exception as exc:
            if temp_path is not None:
                temp_path.unlink(missing_ok=True)
            raise CatalogError(
                f"could not save catalog file {self.path}: {exc}; the file on disk is unchanged"
            ) from exc
        self.modified = False

    def _models(self) -> list[Any]:
        if isinstance(self._document, CommentedMap):
            models = self._document.get(_MODELS)
            if isinstance(models, CommentedSeq):
                return models
        return []

    def _location(self, index: int, node: CommentedMap) -> EntryLocation:
        return EntryLocation(self.path, index, _line_of(self._models(), index), _field_lines(node))


def to_plain(value: Any) -> Any:
    """Round-trip YAML nodes as plain dicts, lists, str, int, float and bool."""
    if isinstance(value, Mapping):
        return {str(name): to_plain(item) for name, item in value.items()}
    if isinstance(value, list):
        return [to_plain(item) for item in value]
    for plain_type in (bool, int, float, str):
        if isinstance(value, plain_type):
            return plain_type(value)
    return value


def _read_bounded(path: Path) -> str:
    """The file's text, read only up to just past :data:`MAX_CATALOG_BYTES`."""
    with path.open("rb") as handle:
        data = handle.read(MAX_CATALOG_BYTES + 1)
    if len(data) > MAX_CATALOG_BYTES:
        raise CatalogError(
            f"{path} is refused: it is larger than the {MAX_CATALOG_BYTES} bytes a catalog may "
            "take; split it into several files (--catalog is repeatable)"
        )
    return data.decode("utf-8")


def _load_round_trip(text: str) -> tuple[Any, YAML]:
    """The document, parsed once, and a round-trip YAML set to write back with the indentation
    the file already uses (guessed from its lines)."""
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    try:
        document, sequence_indent, dash_offset = load_yaml_guess_indent(text, yaml=yaml)
    except IndexError:  # ruamel's guess trips on a line holding only dashes, e.g. "  -"
        document, sequence_indent, dash_offset = yaml.load(text), None, None
    if sequence_indent is not None:
        offset = dash_offset or 0
        yaml.indent(
            mapping=max(2, sequence_indent - offset), sequence=sequence_indent, offset=offset
        )
    else:
        yaml.indent(mapping=2, sequence=4, offset=2)
    return document, yaml


def _field_lines(node: CommentedMap) -> dict[str, int]:
    """1-based line of each field that was read from the file (fields added since have none)."""
    lines: dict[str, int] = {}
    for name in node:
        try:
            lines[str(name)] = node.lc.key(name)[0] + 1
        except (KeyError, TypeError):
            continue
    return lines


def _line_of(sequence: CommentedSeq, index: int) -> int | None:
    try:
        return sequence.lc.item(index)[0] + 1
    except (AttributeError, KeyError, TypeError):
        return None


def _like(old: Any, value: Any) -> Any:
    """``value`` as a YAML node, written in the same flow/block style as the value it replaces."""
    if isinstance(value, list | tuple):
        node = CommentedSeq(_like(None, item) for item in value)
        if isinstance(old, CommentedSeq) and old.fa.flow_style():
            node.fa.set_flow_style()
        return node
    if isinstance(value, Mapping):
        node = CommentedMap((name, _like(None, item)) for name, item in value.items())
        if isinstance(old, CommentedMap) and old.fa.flow_style():
            node.fa.set_flow_style()
        return node
    return value
