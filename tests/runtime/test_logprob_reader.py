"""A token's log-probability and alternatives, read from a row, equal a full float64
log-softmax and a full stable sort (ties: the lower id first), at a real vocabulary's size."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.runtime.sampling.logprobs import LogprobReader


@pytest.mark.parametrize("size", [4096, 151936])
@pytest.mark.parametrize("ties", [False, True])
def test_read_equals_a_full_log_softmax_and_sort(size: int, ties: bool) -> None:
    rng = np.random.default_rng(size)
    row = (rng.standard_normal(size) * 4).astype(np.float32)
    if ties:  # many tokens share the largest logit, as unused vocabulary slots share one value
        row[rng.integers(0, size, 300)] = row.max()
    wide = row.astype(np.float64)
    reference = wide - wide.max() - np.log(np.exp(wide - wide.max()).sum())
    order = np.lexsort((np.arange(size), -wide))[:20]
    entry = LogprobReader(lambda token: str(token).encode(), lambda token: f"<{token}>", 20).read(
        row, 7
    )
    assert entry.token == 7 and entry.piece == b"7" and entry.text == "<7>"
    assert abs(entry.logprob - reference[7]) < 1e-6
    assert [top.token for top in entry.top] == order.tolist()
    assert max(abs(top.logprob - reference[top.token]) for top in entry.top) < 1e-6
    assert [top.text for top in entry.top] == [f"<{token}>" for token in order.tolist()]
