"""The MLX Gemma 4 drafter gives transformers 5.23's logits, reading mlx-lm's target cache.

The reference is what transformers computed for the shipped tiny pairs (tools/make_gemma_pair.py
writes ``reference_drafts.npz``: per prompt, the target's next token, then three draft steps,
each fed the previous step's choice). Here the target is mlx-lm's own ``gemma4_text`` model
loaded from the same checkpoint, the drafter :mod:`app.engine.runtime.backends.mlx.gemma4_drafter`,
both in float32. The prompt is run the way a chat runs it — most of it in one call, the last
tokens one at a time — so for the prompt longer than the sliding window (64) the drafter reads
the target's sliding layer from mlx-lm's rotating buffer after it wrapped. Both heads are
checked: the centroid-masked one (E2B/E4B kind) and the dense tied one.
"""

from __future__ import annotations

import mlx.core as mx
import mlx_lm
import numpy as np
import pytest

from app.engine.runtime.backends.mlx.gemma4_drafter import (
    load_drafter,
    target_embeddings,
    target_kv,
)
from tests.drafter.pairs import PAIRS, Pair

TOLERANCE = 1e-4
"""Max |Δlogit| in float32 (measured: a few 1e-6; logits here are of order 10)."""
ONE_AT_A_TIME = 8


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS)
def test_drafts_match_transformers(pair: Pair) -> None:
    target, _tokenizer = mlx_lm.load(str(pair.hf_target))
    target.set_dtype(mx.float32)
    drafter = load_drafter(pair.hf_drafter)
    drafter.set_dtype(mx.float32)
    reference = np.load(pair.reference)
    worst = 0.0
    for index in range(3):
        prompt = reference[f"prompt_{index}"].tolist()
        cache = target.make_cache()
        hidden = target.model(mx.array([prompt[:-ONE_AT_A_TIME]]), cache=cache)
        for token in prompt[-ONE_AT_A_TIME:]:
            hidden = target.model(mx.array([[token]]), cache=cache)
        kv = target_kv(target, cache)
        feed = target_embeddings(target, mx.array([[int(reference[f"first_{index}"])]]))
        previous = hidden[:, -1:]
        for step, drafted in enumerate(reference[f"drafted_{index}"].tolist()):
            logits, carried = drafter.step(feed, previous, len(prompt), kv)
            dense, _ = drafter.step(feed, previous, len(prompt), kv, dense=True)
            for ours, theirs in ((logits, "logits"), (dense, "dense_logits")):
                diff = float(
                    np.abs(np.array(ours[0, 0]) - reference[f"{theirs}_{index}"][step]).max()
                )
                assert diff < TOLERANCE, (index, step, theirs, diff)
                worst = max(worst, diff)
            assert int(logits[0, 0].argmax()) == drafted
            feed, previous = target_embeddings(target, mx.array([[drafted]])), carried
    print(f"{pair.kind}: max |Δlogit| vs transformers {worst:.2e}")


def test_the_centroid_head_scores_only_its_chosen_clusters() -> None:
    drafter = load_drafter(PAIRS["centroid"].hf_drafter)
    head = drafter.masked_embedding
    hidden = mx.random.normal((1, 2, drafter.args.hidden_size), key=mx.random.key(0))
    logits = head(hidden, drafter.model.embed_tokens.weight)
    for row in np.array(logits[0]):
        floor = row.min()
        assert int((row > floor).sum()) == head.top_k * head.per_centroid
