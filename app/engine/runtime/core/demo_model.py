"""Where the bundled demo MTP model lives, so chat and benchmarks work with no ``--model``.

The project trains its own small Qwen3.5-architecture model with an MTP head
(``tools/train_demo_model.py``) and ships its GGUF in ``resources/models/``, which sits beside the
``app`` package both in the source tree and in an installed wheel.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import RuntimeBackendError

DEMO_MODEL_FILENAME = "demo-mtp.gguf"
MODELS_DIR = Path(__file__).resolve().parents[4] / "resources" / "models"
DEMO_VISION_FOLDER = "demo-vision"
DEMO_VISION_FILENAME = "demo-vision-Q8_0.gguf"
DEMO_VISION_DIR = MODELS_DIR / DEMO_VISION_FOLDER
"""The vision demo (``tools/make_vision_model.py``): a small Qwen3.5 trunk with its MTP block and
the projector of an untrained vision tower, in a folder of their own (a projector belongs to every
GGUF model in its folder)."""
DEMO_VISION_MODEL = DEMO_VISION_DIR / DEMO_VISION_FILENAME
DEMO_VISION_PROJECTOR = DEMO_VISION_DIR / "mmproj-demo-vision-F16.gguf"
DEMO_VISION_MLX_DIR = MODELS_DIR / "demo-vision-mlx"
"""The MLX vision demo (``tools/make_mlx_vision_model.py``): the vision demo's shape, trunk and
head briefly trained, vision tower untrained, converted by mlx-vlm (8-bit language model, BF16
tower) with its MTP head beside it as ``mtp.safetensors``; pictures on MLX are tested with it."""


def demo_model_path(models_dir: Path = MODELS_DIR) -> Path:
    """The bundled demo GGUF; a clear error when the installation lacks it."""
    path = models_dir / DEMO_MODEL_FILENAME
    if not path.is_file():
        raise RuntimeBackendError(
            f"the bundled demo model {path} is missing; pass --model PATH to a .gguf model, or "
            "rebuild it with tools/train_demo_model.py"
        )
    return path
