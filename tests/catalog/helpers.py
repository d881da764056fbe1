"""Builders for small catalog files used by the catalog tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def entry(key: str = "qwen3-6b-mlx-4bit", /, **overrides: Any) -> dict[str, Any]:
    """A valid entry of the issue's example (acme publishing Qwen/Qwen3-6B); None drops a field."""
    fields: dict[str, Any] = {
        "key": key,
        "source_model": "Qwen/Qwen3-6B",
        "quant": "4bit",
        "tier": "small",
        "slices": ["full"],
        "output_name": f"{key}-out",
        "hf_repo": f"acme/{key}",
        "mtp_source_repo": "Qwen/Qwen3-6B",
        "mtp_sidecar_repo": "acme/qwen3-6b-mtp",
    }
    fields.update(overrides)
    return {name: value for name, value in fields.items() if value is not None}


def write_catalog(path: Path, *entries: dict[str, Any]) -> Path:
    """Write ``entries`` as a block-style YAML catalog, the way a person would."""
    lines = ["models:"]
    for fields in entries:
        prefix = "  - "
        for name, value in fields.items():
            lines.append(f"{prefix}{name}: {_scalar(value)}")
            prefix = "    "
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _scalar(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    if isinstance(value, str):
        return f'"{value}"' if value == "" or value[0] in "[{&*!|>'\"%@`#" else value
    return str(value)
