"""Where the tiny Gemma 4 pairs' files go, as GGUF repos put a drafter beside its trunk.

The two pairs use the two shapes real repos use, so pairing is exercised on both: the centroid
pair keeps its drafter beside the trunk under unsloth's name (``mtp-<base>.gguf``), the dense pair
in an ``MTP/`` subfolder under the ``<base>-assistant`` name. Neither name is what makes a file a
drafter — its ``general.architecture`` is — which the tests check too. Each pair also keeps its
transformers checkpoints (``hf/target``, ``hf/assistant``: the MLX backend's input) and the
reference drafts the MLX drafter is tested against.
"""

from __future__ import annotations

from pathlib import Path

from gemma_pair.shapes import CENTROID

GGUF_QUANT = "Q8_0"
REPORT_NAME = "gemma4-tiny-report.json"
REFERENCE_NAME = "reference_drafts.npz"


def pair_dir(root: Path, kind: str) -> Path:
    return root / f"gemma4-tiny-{kind}"


# The paths below are inside a pair's folder (``pair_dir``, or its staging copy while it is built).


def target_gguf(folder: Path, kind: str) -> Path:
    return folder / f"gemma4-tiny-{kind}-{GGUF_QUANT}.gguf"


def assistant_gguf(folder: Path, kind: str) -> Path:
    if kind == CENTROID:
        return folder / f"mtp-gemma4-tiny-{kind}-{GGUF_QUANT}.gguf"
    return folder / "MTP" / f"gemma4-tiny-{kind}-assistant-{GGUF_QUANT}.gguf"


def hf_target(folder: Path) -> Path:
    return folder / "hf" / "target"


def hf_assistant(folder: Path) -> Path:
    return folder / "hf" / "assistant"


def reference_file(folder: Path) -> Path:
    return folder / REFERENCE_NAME
