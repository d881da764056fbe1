"""The rules that span entries, and files: a merged catalog must stay unambiguous.

Several catalog files are merged into one list, so a key, an output name or a repo used twice is an
error even when the two uses live in different files. Sidecars are checked across entries too: one
sidecar repo must hold the heads of exactly one base model, and every quant of a base model should
share one sidecar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.catalog.problems import EntryLocation, Problem, Severity
from app.engine.catalog.rules import is_repo_id

_UNIQUE_FIELDS = (
    ("key", "keys"),
    ("output_name", "output names"),
    ("hf_repo", "hf_repo values"),
)


@dataclass(frozen=True)
class LocatedFields:
    """An entry's raw fields together with where they were read from."""

    location: EntryLocation
    fields: Mapping[str, Any]

    @property
    def key(self) -> str | None:
        key = self.fields.get("key")
        return key if isinstance(key, str) and key else None

    def describe(self) -> str:
        """``entry 'x' in a.yaml`` — how another problem names this entry."""
        name = f"entry '{self.key}'" if self.key else f"entry #{(self.location.index or 0) + 1}"
        return f"{name} in {self.location.file}" if self.location.file else name


def cross_entry_problems(rows: Sequence[LocatedFields]) -> list[Problem]:
    """Problems that exist only because of other entries, attached to the later entry."""
    problems: list[Problem] = []
    for field_name, plural in _UNIQUE_FIELDS:
        problems.extend(_duplicates(rows, field_name, plural))
    problems.extend(_repo_used_as_model_and_sidecar(rows))
    problems.extend(_sidecar_consistency(rows))
    return problems


def _duplicates(rows: Sequence[LocatedFields], field_name: str, plural: str) -> list[Problem]:
    first_seen: dict[str, LocatedFields] = {}
    problems: list[Problem] = []
    for row in rows:
        value = row.fields.get(field_name)
        if not isinstance(value, str) or not value:
            continue
        folded = value.lower() if field_name == "hf_repo" else value
        first = first_seen.setdefault(folded, row)
        if first is not row:
            problems.append(
                row.location.problem(
                    Severity.ERROR,
                    row.key,
                    field_name,
                    f"duplicate {field_name} {value!r}: {first.describe()} already uses it; "
                    f"{plural} must be unique across all catalog files, so change one of them",
                )
            )
    return problems


def _repo_used_as_model_and_sidecar(rows: Sequence[LocatedFields]) -> list[Problem]:
    model_repos = {
        row.fields["hf_repo"].lower(): row for row in rows if is_repo_id(row.fields.get("hf_repo"))
    }
    problems: list[Problem] = []
    for row in rows:
        sidecar = row.fields.get("mtp_sidecar_repo")
        owner = model_repos.get(sidecar.lower()) if is_repo_id(sidecar) else None
        if owner is not None and owner is not row:
            problems.append(
                row.location.problem(
                    Severity.ERROR,
                    row.key,
                    "mtp_sidecar_repo",
                    f"mtp_sidecar_repo {sidecar!r} is the hf_repo of {owner.describe()}; a "
                    "sidecar needs a repo of its own, so rename the sidecar repo",
                )
            )
    return problems


def _sidecar_consistency(rows: Sequence[LocatedFields]) -> list[Problem]:
    source_of_sidecar: dict[str, LocatedFields] = {}
    sidecar_of_base: dict[str, LocatedFields] = {}
    problems: list[Problem] = []
    for row in rows:
        source = row.fields.get("mtp_source_repo")
        sidecar = row.fields.get("mtp_sidecar_repo")
        if not (is_repo_id(source) and is_repo_id(sidecar)):
            continue
        first_user = source_of_sidecar.setdefault(sidecar.lower(), row)
        if first_user.fields["mtp_source_repo"] != source:
            problems.append(
                row.location.problem(
                    Severity.ERROR,
                    row.key,
                    "mtp_sidecar_repo",
                    f"sidecar repo {sidecar!r} would hold the heads of {source!r}, but "
                    f"{first_user.describe()} fills it from "
                    f"{first_user.fields['mtp_source_repo']!r}; one sidecar serves one base "
                    "model, so give this base model its own sidecar repo",
                )
            )
            continue
        first_of_base = sidecar_of_base.setdefault(source, row)
        first_sidecar = first_of_base.fields["mtp_sidecar_repo"]
        if first_sidecar.lower() != sidecar.lower():
            problems.append(
                row.location.problem(
                    Severity.WARNING,
                    row.key,
                    "mtp_sidecar_repo",
                    f"base model {source!r} has two sidecars: this entry points at {sidecar!r} "
                    f"but {first_of_base.describe()} points at {first_sidecar!r}; one sidecar "
                    "serves every quant of a base model, so point them all at the same repo",
                )
            )
    return problems
