"""The sidecar repo's README.md: license inherited from the source card, provenance, usage.

Why: a sidecar is a derivative of one specific commit of one release. Its card must carry that
release's license terms unchanged (``license``, ``license_name``, ``license_link`` are copied
value for value), point at it as ``base_model``, record exactly what was extracted (repo, full
commit id, layout, layer indices, tool and version, UTC time) and tell a reader plainly that the
file is not a model on its own and how to use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from huggingface_hub import ModelCardData
from huggingface_hub.repocard import RepoCard

from app.engine.credentials import mask_credentials
from app.engine.units import format_bytes

LICENSE_FIELDS = ("license", "license_name", "license_link")
SIDECAR_TAGS = ("mtp-sidecar", "mtp", "multi-token-prediction", "speculative-decoding")


@dataclass(frozen=True)
class SidecarProvenance:
    """Everything the card states about where the sidecar came from."""

    source_repo: str
    source_sha: str
    layout: str
    layer_indices: tuple[int, ...]
    tensor_count: int
    sidecar_bytes: int
    sha256: str
    tool: str
    tool_version: str
    created_utc: str


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def license_fields(source_readme: str | None) -> dict[str, Any]:
    """The license fields of a model card's front matter, values unchanged; {} if none.

    Raises ``ValueError`` when the front matter exists but is not valid YAML.
    """
    if not source_readme or not source_readme.lstrip().startswith("---"):
        return {}
    try:
        data = RepoCard(source_readme, ignore_metadata_errors=False).data.to_dict()
    except Exception as exc:  # PyYAML's errors, or ValueError for a front matter that is no dict
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"front matter is not valid YAML: {first_line}") from exc
    return {name: data[name] for name in LICENSE_FIELDS if data.get(name) is not None}


def render_card(
    provenance: SidecarProvenance,
    licence: dict[str, Any],
    *,
    sidecar_repo: str,
    endpoint: str,
    filename: str,
) -> str:
    """The complete README.md of the sidecar repo."""
    metadata = ModelCardData(
        base_model=provenance.source_repo,
        tags=[*SIDECAR_TAGS, provenance.layout],
        **licence,
    )
    source_url = mask_credentials(f"{endpoint.rstrip('/')}/{provenance.source_repo}")
    layers = ", ".join(str(i) for i in provenance.layer_indices)
    return f"""---
{metadata.to_yaml()}
---

# MTP sidecar for {provenance.source_repo}

`{filename}` holds the **Multi-Token-Prediction (MTP) heads** of
[{provenance.source_repo}]({source_url}) — the extra layers the model was trained with to predict
tokens beyond the next one — extracted from the original release and stored in BF16 under their
original tensor names.

**This is not a standalone model.** It has no embeddings, no trunk and no output head; it only
works together with {provenance.source_repo} or any quantisation or conversion of it (GGUF, MLX,
AWQ…), which usually ship *without* these heads because converters strip them.

## How to use it

- Use it as the draft model of native-MTP speculative decoding: the runtime runs the base model,
  feeds its last hidden state to these heads to draft tokens, and verifies the drafts in one pass
  of the base model — faster generation with exactly the base model's output distribution.
- With MTP Studio (`mtp-studio`): set `mtp_sidecar_repo: {sidecar_repo}` on the base model's
  catalog entries and turn MTP on in chat; the sidecar is downloaded next to the model.
- By hand: `hf download {sidecar_repo} {filename}`, then load the tensors with `safetensors` and
  map them as your runtime maps the original checkpoint's MTP tensors (names are unchanged).

## Provenance

| | |
|---|---|
| Source repository | [{provenance.source_repo}]({source_url}) |
| Source commit | `{provenance.source_sha}` |
| MTP layout | `{provenance.layout}` |
| MTP layer indices | {layers} |
| Tensors | {provenance.tensor_count} (BF16, scale tensors consumed by dequantisation) |
| File | `{filename}`, {format_bytes(provenance.sidecar_bytes)}, SHA-256 `{provenance.sha256}` |
| Extracted with | {provenance.tool} {provenance.tool_version} |
| Extracted at (UTC) | {provenance.created_utc} |

The license above is copied unchanged from the source model's card; the source model's terms
apply to this file.
"""
