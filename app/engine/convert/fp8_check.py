"""Is this model folder an FP8 checkpoint? Read from its config and tensor names only.

A folder counts as FP8 when ``config.json`` declares ``quantization_config.quant_method: fp8``
(at the top level or under ``text_config``) or when its tensors include ``…_scale_inv`` scale
companions. Both are cheap to read (the index, or one safetensors header), so the model picker
and the backend choice can say "convert it first" before anything is loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.errors import MtpStudioError
from app.engine.mtp.checkpoint import read_checkpoint_index
from app.engine.mtp.source import LocalFolderSource

SCALE_SUFFIX = "_scale_inv"
FP8_REFUSAL = "mlx-lm cannot load FP8 checkpoints"


@dataclass(frozen=True)
class Fp8Checkpoint:
    """An FP8 folder: how many scale tensors it carries and the quantisation its config names."""

    folder: Path
    scale_tensors: int
    quant_method: str

    def refusal(self) -> str:
        """One line saying what and why, then the way forward (for the banner's Details)."""
        scales = f" with {self.scale_tensors} block scales" if self.scale_tensors else ""
        return (
            f"{FP8_REFUSAL}: {model_name(self.folder)} stores its weights as FP8{scales}.\n"
            f"Convert it to BF16 here (Convert for MLX…, or `mtp-studio convert {self.folder}`), "
            "optionally quantised for MLX, or search the Hub for a BF16 or MLX conversion of "
            "the same model."
        )


def is_fp8_refusal(reason: str | None) -> bool:
    """Whether a model's ``runnable_reason`` (or a load error) is this refusal, which the chat
    answers with a conversion."""
    return bool(reason) and str(reason).startswith(FP8_REFUSAL)


def model_name(folder: Path) -> str:
    """The model's name: the repo name for a Hugging Face cache snapshot (whose folder is a
    commit hash), else the folder's."""
    folder = Path(folder)
    for parent in folder.parents:
        if parent.name.startswith("models--"):
            return parent.name.split("--")[-1]
    return folder.name


def fp8_checkpoint(folder: Path) -> Fp8Checkpoint | None:
    """The FP8 facts of ``folder``, or None when it is not an FP8 checkpoint (or unreadable:
    whoever loads it then reports why)."""
    folder = Path(folder)
    method = _quant_method(folder / "config.json")
    try:
        index = read_checkpoint_index(LocalFolderSource(folder))
    except MtpStudioError:
        return Fp8Checkpoint(folder, 0, method) if method == "fp8" else None
    scales = sum(name.endswith(SCALE_SUFFIX) for name in index.weight_map)
    if method != "fp8" and not scales:
        return None
    return Fp8Checkpoint(folder, scales, method or "fp8")


def _quant_method(config_path: Path) -> str:
    try:
        config: Any = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return ""
    if not isinstance(config, dict):
        return ""
    scopes = [config, config.get("text_config")]
    for scope in scopes:
        if isinstance(scope, dict) and isinstance(scope.get("quantization_config"), dict):
            method = scope["quantization_config"].get("quant_method")
            if isinstance(method, str):
                return method.lower()
    return ""
