"""Exactness after a picture on the vision demo (docs/architecture.md#the-exactness-contract):
after sampled cycles with accepted, partial and rejected drafts, the trunk's logits and the MTP
head's draft logits equal those of a fresh run over the same picture and committed tokens — the
positions after a picture (fewer than its cells) are kept right through every rollback."""

from __future__ import annotations

import numpy as np

from app.engine.runtime.sampling.sampler import greedy_token
from tests.runtime.draft_rows import draft_rows
from tests.runtime.test_exactness import _committed_after_cycles
from tests.vision.test_image_generation import image, vision_backend  # noqa: F401 (fixture)

PROMPT = "<|im_start|>user\n{marker}Write a function that parses a date.<|im_end|>\n"
PROMPT += "<|im_start|>assistant\n"


def _prompt(backend) -> list[int]:
    """The prompt's cells, its picture prepared for the next prefill."""
    text = PROMPT.format(marker=backend.image_marker)
    return backend.tokenize_with_images(text, [image(192, 128, seed=61)])


def test_the_state_after_cycles_past_a_picture_is_a_fresh_runs(vision_backend) -> None:  # noqa: F811
    backend = vision_backend
    prompt = _prompt(backend)
    committed, accepted = _committed_after_cycles(backend, prompt, [3] * 12, seed=7)
    assert set(accepted) & {1, 2} and 0 in accepted
    after_cycles = backend.step(committed[-1]).copy()  # the backend's buffer: keep a copy

    backend.reset()
    backend.prefill(_prompt(backend), with_mtp=False)
    for token in committed:
        fresh = backend.step(token)
    fresh = fresh.copy()
    difference = float(np.max(np.abs(after_cycles - fresh)))
    assert greedy_token(after_cycles) == greedy_token(fresh)
    assert difference < 1e-2

    # the bound has power: the same tokens one position off (as if the picture's positions
    # were counted by its cells after a rollback) give other logits
    backend.reset()
    backend.prefill(_prompt(backend), with_mtp=False)
    backend._decoder.shift -= 1  # reaching in only to build the wrong state
    for token in committed:
        wrong = backend.step(token)
    assert float(np.max(np.abs(after_cycles - wrong))) > 100 * max(difference, 1e-5)


def test_the_heads_drafts_after_cycles_past_a_picture_are_a_fresh_prefills(
    vision_backend,  # noqa: F811
) -> None:
    backend = vision_backend
    committed, accepted = _committed_after_cycles(backend, _prompt(backend), [3, 0, 2, 3] * 3, 9)
    assert set(accepted) & {1, 2}

    def first_draft_logits() -> np.ndarray:
        return draft_rows(backend, committed[-1], 3)[1]

    after_cycles = first_draft_logits()
    backend.reset()
    backend.prefill(_prompt(backend) + committed[:-1], with_mtp=True)
    fresh = first_draft_logits()
    assert float(np.max(np.abs(after_cycles - fresh))) < 1e-2
