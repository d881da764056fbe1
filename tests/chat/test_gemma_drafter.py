"""The chat window with a Gemma 4 target: the model bar shows its drafter and the reply drafts.

Opening the tiny dense pair's target GGUF (its drafter in the ``MTP/`` folder beside it), the bar
says the model drafts with a drafter of that size and where the drafter is, the worker loads the
pair, and a reply's figures carry the drafts' acceptance.
"""

from __future__ import annotations

from tests.drafter.pairs import PAIRS


def test_the_model_bar_shows_the_drafter_and_the_reply_drafts_with_it(chat) -> None:
    pair = PAIRS["dense"]
    window = chat.open()
    chat.load(window, pair.target)
    info = window.model_bar.info.text()
    assert "MTP: drafter 381.2 kB ✓" in info
    assert f"Drafter paired: {pair.drafter}" in info
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(24)
    reply = chat.ask(window, "How do I sort a list?")
    assert reply.text.strip()
    assert "acceptance by depth" in reply.figures.text()
