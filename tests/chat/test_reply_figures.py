"""The figures under a reply, with real llama.cpp: the compact line, the details on demand (the
prompt too, and how much of it was reused from earlier turns), and the "MTP ×N faster" badge
measured against the model's plain replies."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.chat.conversation import ASSISTANT, MessageState, StoredMessage
from app.engine.chat.figures import NOT_MEASURED_TEXT
from app.engine.chat.plain_speed import (
    BADGE_MIN_SPEEDUP,
    MIN_MEASURED_TOKENS,
    PlainSpeedStore,
    speed_key,
)
from app.engine.chat.remote_reply import REMOTE_MODE
from app.engine.runtime.core.stats import DecodeStats
from app.ui.chat.transcript.column import TranscriptView


def _stored_stats(window) -> DecodeStats:
    conversation = window.store.conversation(window.conversations.current_id)
    stats = conversation.messages[-1].stats
    assert stats is not None
    return stats


def _plain_store(window) -> PlainSpeedStore:
    return window.transcript.plain_speeds


@pytest.mark.slow
def test_the_compact_line_and_the_details_agree_with_the_stats(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(60)
    window.settings_panel.temperature.setValue(0.0)  # greedy: the tiny model runs to max tokens
    window.settings_panel.mtp_depth.setValue(2)
    reply = chat.ask(window, "Tell me about lines")
    stats = _stored_stats(window)
    summary = reply.summary.text()
    assert summary == (
        f"60 tokens · {stats.decode_tokens_per_second:.1f} tok/s · "
        f"MTP {stats.tokens_per_cycle:.2f} tokens/cycle · max tokens"
    )
    assert reply.summary.isVisible() and not reply.details.isVisible()
    chat.qtbot.mouseClick(reply.details_button, Qt.MouseButton.LeftButton)
    assert reply.details.isVisible()
    basics, mtp = reply.figures.text().split("\n")
    assert basics == (
        f"60 tokens · {stats.decode_tokens_per_second:.1f} tok/s · "
        f"TTFT {stats.ttft_seconds * 1000:.0f} ms · max tokens"
    )
    assert mtp.startswith("MTP depth 2 (Leviathan–Chen) · acceptance by depth ")
    rates = " / ".join(f"{rate:.0%}" for rate in stats.acceptance_by_depth)
    assert f"acceptance by depth {rates} · mean accepted {stats.mean_accepted_length:.2f}" in mtp
    assert mtp.endswith(f"{stats.tokens_per_cycle:.2f} tokens/cycle")
    assert reply.summary.toolTip() == reply.figures.text()
    chat.qtbot.mouseClick(reply.details_button, Qt.MouseButton.LeftButton)
    assert not reply.details.isVisible()


@pytest.mark.slow
def test_the_badge_compares_with_the_measured_plain_speed(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    panel = window.settings_panel
    panel.max_tokens.setValue(80)
    panel.temperature.setValue(0.0)
    panel.mtp_depth.setValue(2)

    early = chat.ask(window, "Before any plain reply")
    assert not early.badge.isVisible()
    assert early.speed.text() == NOT_MEASURED_TEXT  # says how to get the figure

    panel.mtp_enabled.setChecked(False)
    plain = chat.ask(window, "Now without drafting")
    plain_stats = _stored_stats(window)
    assert plain_stats.depth == 0 and plain_stats.generated_tokens >= MIN_MEASURED_TOKENS
    assert not plain.badge.isVisible() and not plain.speed.text()
    measured = _plain_store(window).plain_speed(speed_key(tiny_gguf, "llama.cpp"))
    assert measured is not None and measured.replies == 1
    assert measured.tokens_per_second == pytest.approx(plain_stats.decode_tokens_per_second)

    panel.mtp_enabled.setChecked(True)
    drafted = chat.ask(window, "And with drafting again")
    stats = _stored_stats(window)
    ratio = stats.decode_tokens_per_second / plain_stats.decode_tokens_per_second
    assert drafted.speed.text().startswith(
        f"MTP ×{ratio:.2f} against this model's plain speed, "
        f"{plain_stats.decode_tokens_per_second:.1f} tok/s (median of 1 plain reply"
    )
    assert drafted.badge.isVisibleTo(window) == (ratio >= BADGE_MIN_SPEEDUP)
    if ratio >= BADGE_MIN_SPEEDUP:
        assert drafted.badge.text() == f"MTP ×{ratio:.1f} faster"
    assert early.speed.text().startswith("MTP ×")  # the earlier reply is now measured too


@pytest.mark.slow
def test_compare_measures_the_plain_speed(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(40)
    window.settings_panel.temperature.setValue(0.0)
    dialog = window.open_compare("Compare these")
    assert dialog is not None
    chat.qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=120_000)
    measured = _plain_store(window).plain_speed(speed_key(tiny_gguf, "llama.cpp"))
    plain = dialog.outcome.plain.stats
    assert measured is not None and measured.replies == 1
    assert measured.tokens_per_second == pytest.approx(plain.decode_tokens_per_second)
    dialog.close()


def test_a_reply_twice_the_plain_speed_shows_its_badge(qtbot, tiny_gguf: Path) -> None:
    """A stored reply of the loaded model, its plain speed recorded at half its own speed."""
    mtp = DecodeStats("lc", 2, 20, 200, 80, (80, 60), (70, 50), 0.5, 0.6, 1.5, 0.1, 140, 0.8, 80)
    plain = DecodeStats("lc", 0, 20, 100, 100, (), (), 0.5, 0.6, 1.5, 0.0, 0, 0.0, 0)
    assert mtp.decode_tokens_per_second == 2 * plain.decode_tokens_per_second
    view = TranscriptView()
    qtbot.addWidget(view)
    message = StoredMessage(
        1, 1, ASSISTANT, "Fast.", MessageState.COMPLETE, time.time(), "tiny-mtp.gguf", "stop", mtp
    )
    reply = view.show_messages((message,))[0]
    assert not reply.badge.isVisibleTo(view)  # no model loaded: nothing to compare with
    view.set_speed_model("tiny-mtp.gguf", tiny_gguf, "llama.cpp")
    assert not reply.badge.isVisibleTo(view) and reply.speed.text() == NOT_MEASURED_TEXT
    view.record_plain_reply(plain)
    assert reply.badge.isVisibleTo(view) and reply.badge.text() == "MTP ×2.0 faster"
    assert reply.badge.toolTip() == reply.speed.text()
    assert reply.speed.text().startswith("MTP ×2.00 against this model's plain speed, 100.0 tok/s")
    view.set_speed_model("another.gguf", tiny_gguf, "llama.cpp")  # not this reply's model
    assert not reply.badge.isVisibleTo(view) and not reply.speed.isVisibleTo(view)


def test_the_details_say_how_much_of_the_prompt_was_reused(qtbot) -> None:
    """Stored replies: one whose prompt mostly came from the state kept since the last turn, one
    computed from scratch, one from a server (which does not say), one without figures."""
    base = DecodeStats(
        "lc", 2, 2013, 40, 20, (20, 15), (15, 10), 0.048, 0.05, 0.5, 0.1, 40, 0.3, 20
    )
    reused = replace(base, prompt_reused_tokens=1950)
    fresh = replace(base, prompt_tokens=63)
    remote = replace(
        base, mode=REMOTE_MODE, depth=0, prompt_tokens=40, drafted_by_depth=(), accepted_by_depth=()
    )

    def reply(message_id: int, stats: DecodeStats | None, state=MessageState.COMPLETE):
        return StoredMessage(
            message_id, 1, ASSISTANT, "Hi.", state, time.time(), "tiny-mtp.gguf", "stop", stats
        )

    view = TranscriptView()
    qtbot.addWidget(view)
    kept, computed, served, interrupted = view.show_messages(
        (
            reply(1, reused),
            reply(2, fresh),
            reply(3, remote),
            reply(4, None, MessageState.INTERRUPTED),
        )
    )
    view.resize(900, 1200)  # every reply's Details button in view
    view.show()
    qtbot.waitExposed(view)
    for widget in (kept, computed, served):
        assert not widget.prompt.isVisible()  # in the details, which start closed
        qtbot.mouseClick(widget.details_button, Qt.MouseButton.LeftButton)
        assert widget.prompt.isVisible()
    assert kept.prompt.text() == (
        "Prompt: 2,013 tokens, 1,950 reused from earlier turns, 63 computed in 48 ms"
    )
    assert computed.prompt.text() == "Prompt: 63 tokens, all computed in 48 ms"
    assert served.prompt.text() == "Prompt: 40 tokens (the server does not say how many it reused)"
    assert not interrupted.details_button.isVisible() and not interrupted.prompt.text()


@pytest.mark.slow
def test_the_prompt_line_follows_the_replies_of_a_conversation(chat, tiny_gguf: Path) -> None:
    """Through the real worker: the first reply computed its whole prompt; the next one started
    from the state kept since the first, and its line counts what was reused and computed."""
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(12)
    # A fixed depth: on auto, a turn may be decoded plainly, from a state that was not kept.
    window.settings_panel.mtp_depth.setValue(2)
    # The tiny random model's reply tokenizes differently once it is in the history, so the
    # second turn resumes at the checkpoint kept before the first prompt's last token, which a
    # prompt keeps only when it is long enough (prefix_cache.CHECKPOINT_MIN_GAP).
    first = chat.ask(window, "Hello there, tell me about the sea and the tide. " * 6)
    first_stats = _stored_stats(window)
    assert first_stats.prompt_reused_tokens == 0
    assert first.prompt.text() == (
        f"Prompt: {first_stats.prompt_tokens:,} tokens, all computed in "
        f"{first_stats.prefill_seconds * 1000:,.0f} ms"
    )
    second = chat.ask(window, "And again")
    stats = _stored_stats(window)
    assert 0 < stats.prompt_reused_tokens < stats.prompt_tokens  # the first turn's state was kept
    assert second.prompt.text() == (
        f"Prompt: {stats.prompt_tokens:,} tokens, {stats.prompt_reused_tokens:,} reused from "
        f"earlier turns, {stats.prompt_computed_tokens:,} computed in "
        f"{stats.prefill_seconds * 1000:,.0f} ms"
    )
