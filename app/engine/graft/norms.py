"""Tells whether a Qwen sidecar stores its RMSNorm weights as offsets from 1 or as plain weights.

Raw Qwen3.5/3.6/Next checkpoints compute x · (1 + w), so llama.cpp's converter adds 1 to every
``*norm.weight``; llama.cpp multiplies by the stored value. A sidecar extracted from the original
release is offset-style, but one made from an already-converted checkpoint would not be, and adding
1 twice (or never) gives a head with ~0% acceptance. So the style is measured
(docs/formats.md#running-the-heads): offset-style weights average near 0, absolute ones near 1. The
median over the head's norms decides, because one norm alone can drift far from its start (the demo
head's final norm averages 0.41 in offset style; real final norms can go further).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.engine.graft.naming import QWEN_ARCHITECTURES, is_offset_norm, layer_indexed_names
from app.engine.graft.sidecar import Sidecar, read_all

OFFSET = "offset"
ABSOLUTE = "absolute"
THRESHOLD = 0.5
"""Median of the norms' means below: offset-style (around 0); above: absolute (around 1)."""


@dataclass(frozen=True)
class NormStyle:
    style: str
    means: dict[str, float]
    """Mean weight of each norm tensor, by sidecar name."""


def detect_norm_style(sidecar: Sidecar) -> NormStyle:
    """The norm style of a Qwen sidecar, from the median of its norm weights' means."""
    means: dict[str, float] = {}
    layer_names = layer_indexed_names(sidecar, QWEN_ARCHITECTURES[0], 0)
    with open(sidecar.path, "rb") as handle:
        for name, tensor in sidecar.tensors.items():
            if is_offset_norm(layer_names[name]) and len(tensor.shape) == 1:
                means[name] = float(np.mean(read_all(handle, tensor), dtype=np.float64))
    if not means:
        return NormStyle(ABSOLUTE, means)
    middle = float(np.median(list(means.values())))
    return NormStyle(OFFSET if middle < THRESHOLD else ABSOLUTE, means)
