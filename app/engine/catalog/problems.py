"""What catalog validation reports: one record per problem, precise enough to show inline.

Validation never stops at the first problem. It returns every :class:`Problem` so the GUI can
mark each row and field, and the CLI can print them all at once; only code that needs a usable
catalog turns the errors into a :class:`~app.engine.errors.CatalogError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path


class Severity(StrEnum):
    """An error makes the catalog unusable; a warning flags a likely mistake that still works."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a catalog: where it is and how to fix it.

    ``key`` is the entry's key when it has a usable one; ``index`` is the entry's position in its
    file's ``models:`` list (0-based), so an entry without a key can still be found. ``line`` is
    1-based, when the YAML parser knows it.
    """

    severity: Severity
    file: Path | None
    key: str | None
    field: str | None
    message: str
    index: int | None = None
    line: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def location(self) -> str:
        """``catalog.yaml:12: entry 'qwen3-6b-mlx-4bit', field 'hf_repo'``, known parts only."""
        parts: list[str] = []
        if self.key is not None:
            parts.append(f"entry '{self.key}'")
        elif self.index is not None:
            parts.append(f"entry #{self.index + 1}")
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        where = ", ".join(parts)
        if self.file is None:
            return where or "catalog"
        file_part = f"{self.file}:{self.line}" if self.line else str(self.file)
        return f"{file_part}: {where}" if where else file_part

    def __str__(self) -> str:
        return f"{self.severity}: {self.location()}: {self.message}"


@dataclass(frozen=True)
class EntryLocation:
    """Where an entry sits, so every problem about it can point there."""

    file: Path | None = None
    index: int | None = None
    line: int | None = None
    field_lines: Mapping[str, int] = field(default_factory=dict, hash=False)

    def problem(
        self, severity: Severity, key: str | None, field_name: str | None, message: str
    ) -> Problem:
        line = self.field_lines.get(field_name, self.line) if field_name else self.line
        return Problem(severity, self.file, key, field_name, message, self.index, line)


def errors_only(problems: list[Problem]) -> list[Problem]:
    return [problem for problem in problems if problem.is_error]
