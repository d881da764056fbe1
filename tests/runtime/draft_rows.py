"""The head's logits rows of a greedy draft, as a test compares them: copied as the chooser sees
them (a backend hands each row over as a view of its own buffer, valid during the call only)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from app.engine.runtime.core.backend import DecodeBackend
from app.engine.runtime.sampling.sampler import greedy_token


def draft_rows(
    backend: DecodeBackend,
    last: int,
    depth: int,
    pick: Callable[[int, np.ndarray], int] = lambda _index, row: greedy_token(row),
) -> tuple[tuple[int, ...], np.ndarray]:
    """Draft up to ``depth`` tokens after ``last``, each as ``pick`` (index, row) chooses
    (greedily by default): the drafts and the rows (depth × V)."""
    rows: list[np.ndarray] = []

    def choose(index: int, row: np.ndarray) -> int:
        rows.append(np.array(row, dtype=np.float32))
        return pick(index, row)

    result = backend.draft(last, depth, choose)
    return result.tokens, np.stack(rows)
