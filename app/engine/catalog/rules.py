"""The rules one catalog entry must follow on its own (docs/catalog.md#rules), field by field.

Kept apart from the cross-entry rules so the GUI can validate a row as the user types, before the
entry is part of any catalog. Every message says what is wrong and how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from app.engine.catalog.entry import KNOWN_FIELDS, REQUIRED_FIELDS, CatalogEntry, sidecar_repo_for
from app.engine.catalog.problems import EntryLocation, Problem, Severity, errors_only
from app.engine.errors import CatalogError
from app.engine.safepath import plain_name_problem

_KEY = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_REPO_PART}/{_REPO_PART}$")
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_QUANT_MARKER = re.compile(
    r"(?:^|[-_.])("
    r"fp8|fp16|fp4|nvfp4|mxfp4|bf16|f16|f32|int4|int8|w4a16|w8a8|w8a16|"
    r"awq|gptq|gguf|mlx|exl2|exl3|bnb|nf4|\d+bit|"
    r"q\d(?:_[0-9a-z]+)*|q\dk|iq\d(?:_[a-z]+)*"
    r")(?=$|[-_.])",
    re.IGNORECASE,
)
_REPO_FIELDS = ("source_model", "hf_repo", "mtp_source_repo", "mtp_sidecar_repo", "drafter_repo")
_TEXT_FIELDS = ("quant", "tier", "output_name")
_EXAMPLES = {
    "key": "qwen3-6-27b-mlx-4bit",
    "source_model": "Qwen/Qwen3.6-27B",
    "quant": "4bit",
    "tier": "medium",
    "slices": "[full]",
    "output_name": "Qwen3.6-27B-mlx-4bit",
    "hf_repo": "acme/Qwen3.6-27B-mlx-4bit",
}


def validate_entry(
    fields: Mapping[str, Any], location: EntryLocation | None = None
) -> list[Problem]:
    """Every problem of one entry taken alone (uniqueness needs the whole catalog)."""
    where = location or EntryLocation()
    raw_key = fields.get("key")
    key = raw_key if isinstance(raw_key, str) and _KEY.match(raw_key) else None
    problems: list[Problem] = []

    def error(field_name: str, message: str) -> None:
        problems.append(where.problem(Severity.ERROR, key, field_name, message))

    for name in REQUIRED_FIELDS:
        if _is_unset(fields.get(name)):
            error(name, f"{name} is missing; add it, e.g. `{name}: {_EXAMPLES[name]}`")
    if not _is_unset(raw_key) and key is None:
        error(
            "key",
            f"key {raw_key!r} is not lowercase-kebab; use lowercase letters, digits and single "
            f"hyphens, e.g. `{_EXAMPLES['key']}`",
        )
    for name in _REPO_FIELDS:
        value = fields.get(name)
        if not _is_unset(value) and not is_repo_id(value):
            error(
                name,
                f"{name} {value!r} is not a Hub repo id; write it as owner/name, "
                "e.g. `Qwen/Qwen3.6-27B` (letters, digits, '.', '_', '-'; no '--' or '..')",
            )
    for name in _TEXT_FIELDS:
        value = fields.get(name)
        if not _is_unset(value) and not isinstance(value, str):
            error(name, f'{name} must be text; put the value in quotes, e.g. `{name}: "{value}"`')
    output_name = fields.get("output_name")
    if isinstance(output_name, str) and not _is_plain_name(output_name):
        error(
            "output_name",
            f"output_name {output_name!r} must be a plain file or folder name without '/' or "
            f"'\\\\', e.g. `{_EXAMPLES['output_name']}`",
        )
    slices = fields.get("slices")
    if not _is_unset(slices) and not _is_text_list(slices):
        error("slices", "slices must be a non-empty list of names, e.g. `slices: [full]`")
    collection = fields.get("hf_collection")
    if not _is_unset(collection) and not (
        isinstance(collection, str) and _COLLECTION.match(collection)
    ):
        error(
            "hf_collection",
            f"hf_collection {collection!r} is not a collection slug; write it as owner/slug, "
            "e.g. `acme/mtp-models-0123456789abcdef01234567`, or remove the field",
        )
    for message in _public_repo_messages(fields.get("public_repos"), fields.get("hf_repo")):
        error("public_repos", message)
    problems.extend(_mtp_problems(fields, where, key))
    for message in _drafter_messages(fields):
        error("drafter_repo", message)
    return problems


def _drafter_messages(fields: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``drafter_repo`` (nothing when it is unset or right)."""
    drafter = fields.get("drafter_repo")
    if _is_unset(drafter) or not is_repo_id(drafter):
        return []
    for other in ("hf_repo", "source_model"):
        if drafter == fields.get(other):
            return [
                f"drafter_repo {drafter!r} is the same repo as {other}; name the repo of the "
                "separate drafter model, e.g. `google/gemma-4-E2B-it-assistant`"
            ]
    if not _is_unset(fields.get("mtp_sidecar_repo")):
        return [
            "drafter_repo and mtp_sidecar_repo are both set; a model drafts either with its own "
            "MTP heads (a sidecar) or with a separate drafter model: keep one"
        ]
    return []


def _public_repo_messages(value: Any, hf_repo: Any) -> list[str]:
    """What is wrong with a ``public_repos`` value (nothing when it is unset or right)."""
    if _is_unset(value):
        return []
    example = "e.g. `public_repos: [unsloth/Qwen3.6-27B-GGUF]`"
    if not _is_text_list(value):
        return [f"public_repos must be a list of Hub repo ids, {example}"]
    messages = []
    for repo in value:
        if not is_repo_id(repo):
            messages.append(
                f"public_repos lists {repo!r}, which is not a Hub repo id; write it as "
                f"owner/name, {example}"
            )
        elif repo == hf_repo:
            messages.append(
                f"public_repos lists {repo!r}, the entry's own hf_repo; list only other "
                "publishers' conversions there"
            )
    duplicates = sorted({repo for repo in value if value.count(repo) > 1})
    if duplicates:
        messages.append(f"public_repos lists {', '.join(duplicates)} more than once")
    return messages


def parse_entry(
    fields: Mapping[str, Any],
    source_file: Path | None = None,
    location: EntryLocation | None = None,
) -> CatalogEntry:
    """Build a :class:`CatalogEntry`, or raise :class:`CatalogError` listing every error."""
    where = location or EntryLocation(file=source_file)
    errors = errors_only(validate_entry(fields, where))
    if errors:
        raise CatalogError("invalid catalog entry:\n" + "\n".join(f"  {p}" for p in errors))
    return CatalogEntry(
        key=fields["key"],
        source_model=fields["source_model"],
        quant=fields["quant"],
        tier=fields["tier"],
        slices=tuple(fields["slices"]),
        output_name=fields["output_name"],
        hf_repo=fields["hf_repo"],
        mtp_source_repo=_optional(fields.get("mtp_source_repo")),
        mtp_sidecar_repo=_optional(fields.get("mtp_sidecar_repo")),
        drafter_repo=_optional(fields.get("drafter_repo")),
        hf_collection=_optional(fields.get("hf_collection")),
        public_repos=tuple(fields.get("public_repos") or ()),
        extra=MappingProxyType({k: v for k, v in fields.items() if k not in KNOWN_FIELDS}),
        source_file=source_file,
    )


def is_repo_id(value: object) -> bool:
    """``owner/name`` as the Hub accepts it (no ``--`` or ``..``, at most 96 characters a part)."""
    return (
        isinstance(value, str)
        and _REPO_ID.fullmatch(value) is not None
        and "--" not in value
        and ".." not in value
    )


def quant_marker(repo_id: str) -> str | None:
    """The quantisation marker in a repo name (``-FP8``, ``-4bit``, ``-Q4_K_M``…), if any."""
    match = _QUANT_MARKER.search(repo_id.rsplit("/", 1)[-1])
    return match.group(1) if match else None


def _mtp_problems(
    fields: Mapping[str, Any], where: EntryLocation, key: str | None
) -> list[Problem]:
    source = fields.get("mtp_source_repo")
    sidecar = fields.get("mtp_sidecar_repo")
    if _is_unset(source) and _is_unset(sidecar):
        return []
    if _is_unset(source) or _is_unset(sidecar):
        present, missing = (
            ("mtp_source_repo", "mtp_sidecar_repo")
            if _is_unset(sidecar)
            else ("mtp_sidecar_repo", "mtp_source_repo")
        )
        return [
            where.problem(
                Severity.ERROR,
                key,
                missing,
                f"{present} is set but {missing} is missing; MTP fields go together: set both "
                "(mtp_source_repo: the canonical BF16/FP8 release, mtp_sidecar_repo: "
                "owner/<base-slug>-mtp) or remove both",
            )
        ]
    if not (is_repo_id(source) and is_repo_id(sidecar)):
        return []
    problems: list[Problem] = []
    suggestion = sidecar_repo_for(_publisher_owner(fields, sidecar), source)
    if sidecar in (source, fields.get("hf_repo")):
        other = "mtp_source_repo" if sidecar == source else "hf_repo"
        fix = f"e.g. `{suggestion}`" if suggestion != sidecar else f"rename {other}"
        problems.append(
            where.problem(
                Severity.ERROR,
                key,
                "mtp_sidecar_repo",
                f"mtp_sidecar_repo {sidecar!r} is the same repo as {other}; the sidecar needs "
                f"a repo of its own ({fix})",
            )
        )
    marker = quant_marker(sidecar)
    if marker is not None:
        problems.append(
            where.problem(
                Severity.WARNING,
                key,
                "mtp_sidecar_repo",
                f"sidecar repo {sidecar!r} carries the quant marker {marker!r}; a sidecar holds "
                "the heads in BF16 and serves every quantisation of its base model, so name it "
                f"without one, e.g. `{suggestion}`",
            )
        )
    return problems


def _publisher_owner(fields: Mapping[str, Any], sidecar: str) -> str:
    """The namespace the entry publishes to: its hf_repo's owner, else the sidecar's."""
    hf_repo = fields.get("hf_repo")
    return (hf_repo if is_repo_id(hf_repo) else sidecar).split("/")[0]


def _is_unset(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _is_plain_name(name: str) -> bool:
    return bool(name.strip()) and plain_name_problem(name) is None


def _is_text_list(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(item, str) and item.strip() for item in value)
    )


def _optional(value: Any) -> str | None:
    return None if _is_unset(value) else value
