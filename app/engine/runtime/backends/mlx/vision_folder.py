"""Whether a model folder can read pictures on the MLX backend, told without loading anything.

The server asks this before a model loads (so a picture sent to a text-only MLX model is a 400 at
once, and one sent to a vision model waits for the load), and the backend asks it at load. Nothing
here imports MLX or mlx-vlm: a folder reads pictures when its ``config.json`` has a
``vision_config`` and mlx-vlm is installed (docs/vision.md#mlx).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any


def vision_config_of(folder: Path) -> dict[str, Any] | None:
    """The folder's ``vision_config`` (None: a text-only model, or no readable config)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    vision = config.get("vision_config") if isinstance(config, dict) else None
    return vision if isinstance(vision, dict) else None


def unavailable_reason(folder: Path) -> str | None:
    """Why the folder's model reads no pictures on MLX, in one line (None: it can)."""
    name = Path(folder).name
    if vision_config_of(folder) is None:
        return (
            f"{name} has no vision tower (its config.json has no vision_config), so it cannot "
            "read images"
        )
    if importlib.util.find_spec("mlx_vlm") is None:
        return (
            f"{name} has a vision tower, but mlx-vlm is not installed, so the MLX backend cannot "
            "read its images: pip install 'mtp-studio[vision-mlx]'"
        )
    return None
