"""The load options saved in Settings reach the Chat page: the model loads with them, and saving
new ones loads it again with those (context window, KV cache type)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.settings import Settings


@pytest.mark.slow
def test_saved_load_options_load_the_model_and_a_change_reloads_it(
    chat, reading_model: Path
) -> None:
    window = chat.open()
    chat.load(window, reading_model)
    assert window.target.info is not None
    chosen = window.target.info.context_length
    assert chosen >= 2048  # chosen from this machine's memory, not a flat value

    window.apply_settings(replace(Settings(), context_length=1536))
    chat.qtbot.waitUntil(
        lambda: window.target.info is not None and window.target.info.context_length == 1536,
        timeout=60_000,
    )
    assert window.model_bar.state.text() == f"Ready: {reading_model.name}"
    assert "for 1536 tokens" in window.model_bar.info.text()  # the estimate is for that context

    # Saving the same options again loads nothing.
    window.apply_settings(replace(Settings(), context_length=1536))
    assert window.model_bar.state.text() == f"Ready: {reading_model.name}"
