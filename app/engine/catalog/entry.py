"""One catalog entry as the rest of the app sees it: typed, immutable, with nothing lost.

The YAML file is the source of truth and may carry fields this version does not know (another
tool's, or a newer version's). They ride along in :attr:`CatalogEntry.extra` so an edit made in
the GUI and saved back never drops them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

REQUIRED_FIELDS: tuple[str, ...] = (
    "key",
    "source_model",
    "quant",
    "tier",
    "slices",
    "output_name",
    "hf_repo",
)
MTP_FIELDS: tuple[str, ...] = ("mtp_source_repo", "mtp_sidecar_repo")
OPTIONAL_FIELDS: tuple[str, ...] = (*MTP_FIELDS, "drafter_repo", "hf_collection", "public_repos")
KNOWN_FIELDS: tuple[str, ...] = (*REQUIRED_FIELDS, *OPTIONAL_FIELDS)


def _empty_mapping() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class CatalogEntry:
    """A validated entry; build one with :func:`app.engine.catalog.parse_entry`.

    ``source_file`` says which catalog file the entry came from (``None`` for a new entry not yet
    placed in a file); it does not take part in equality.
    """

    key: str
    source_model: str
    quant: str
    tier: str
    slices: tuple[str, ...]
    output_name: str
    hf_repo: str
    mtp_source_repo: str | None = None
    mtp_sidecar_repo: str | None = None
    drafter_repo: str | None = None
    """A separate drafter model for this entry's format (Gemma 4's ``-it-assistant``; a GGUF
    drafter for a GGUF entry), fetched beside the model: for models without native MTP heads."""
    hf_collection: str | None = None
    public_repos: tuple[str, ...] = ()
    """Public conversions of the same model and format that users download (e.g. a GGUF repo of
    another publisher), offered beside ``hf_repo`` to users who publish nothing."""
    extra: Mapping[str, Any] = field(default_factory=_empty_mapping, hash=False)
    source_file: Path | None = field(default=None, compare=False)

    @property
    def base_model(self) -> str:
        """The model whose quantisations share one sidecar: the MTP source repo when set."""
        return self.mtp_source_repo or self.source_model

    @property
    def has_sidecar(self) -> bool:
        return self.mtp_source_repo is not None and self.mtp_sidecar_repo is not None

    def to_fields(self) -> dict[str, Any]:
        """Plain field mapping (known fields first, unset optional ones left out, then extras).

        This is what an editor starts from and what ``--json`` prints; feeding it back through
        ``parse_entry`` gives an equal entry.
        """
        fields: dict[str, Any] = {
            "key": self.key,
            "source_model": self.source_model,
            "quant": self.quant,
            "tier": self.tier,
            "slices": list(self.slices),
            "output_name": self.output_name,
            "hf_repo": self.hf_repo,
        }
        for name in OPTIONAL_FIELDS:
            value = getattr(self, name)
            if isinstance(value, tuple):
                if value:
                    fields[name] = list(value)
            elif value is not None:
                fields[name] = value
        fields.update(self.extra)
        return fields


def sidecar_repo_for(owner: str, base_model: str) -> str:
    """The conventional sidecar repo of a base model: ``<owner>/<base-slug>-mtp``.

    ``sidecar_repo_for("acme", "Qwen/Qwen3.6-27B")`` → ``"acme/qwen3-6-27b-mtp"``.
    """
    base_name = base_model.rsplit("/", 1)[-1]
    return f"{owner}/{base_name.lower().replace('.', '-')}-mtp"
