"""The end-token mask of ``min_tokens``/``ignore_eos`` counts positions as a grammar does:
drafts consumed move it forward, rolled-back drafts move it back, so a cycle's mask at each
position is the one plain decoding has there."""

from __future__ import annotations

import numpy as np

from app.engine.runtime.chat_format.end_tokens import EndTokensHeld

ENDS = np.array([False, False, True, False, True])


def test_the_end_is_held_back_until_min_tokens_and_drafts_count_as_positions() -> None:
    rule = EndTokensHeld(None, ENDS, until=3)
    assert list(rule.allowed()) == [True, True, False, True, False]
    for token in (0, 1):  # two committed tokens, then a drafted one
        rule.consume(token)
    assert not rule.allowed()[2]
    rule.consume(3)  # the draft at position 2: position 3 may end
    assert rule.allowed().all()
    rule.rollback(1)  # the draft was rejected: position 2 again, still held back
    assert not rule.allowed()[2] and not rule.finished


def test_ignore_eos_holds_the_end_back_for_the_whole_reply() -> None:
    rule = EndTokensHeld(None, ENDS, until=None)
    for token in range(100):
        rule.consume(token % 2)
    assert list(rule.allowed()) == [True, True, False, True, False]
