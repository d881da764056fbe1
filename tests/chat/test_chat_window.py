"""The chat window as a user drives it, with real llama.cpp in the runtime's worker process.

See conftest.py for which model each test uses and why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.engine.chat import markdown_text
from app.engine.chat.conversation import MessageState
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.speculative.depth_policy import AUTO_MAX_DEPTH
from app.engine.settings import Settings
from app.engine.units import format_bytes
from app.ui.chat.transcript import message_widget
from tests.runtime.tiny_model import SPECIAL_TOKENS

LONG_REPLY = 4000


def _stored_reply(window):
    conversation = window.store.conversation(window.conversations.current_id)
    return conversation.messages[-1]


def _assert_whole_reply(reply, max_tokens: int) -> None:
    """A finished, sampled reply: it may end its turn early, but it is not failed or empty."""
    figures = reply.figures.text().split("\n")[0]
    assert 1 <= int(figures.split(" tokens")[0]) <= max_tokens, figures
    assert figures.endswith((" · end of turn", " · max tokens")), figures


@pytest.mark.slow
def test_a_streamed_reply_appears_and_its_statistics_are_shown(
    chat, tiny_gguf: Path, monkeypatch
) -> None:
    # The tiny model can write all 300 tokens faster than one re-render interval: hold later
    # re-renders back for a minute, so what is checked is that the first text shows at once.
    monkeypatch.setattr(message_widget, "RENDER_INTERVAL_MS", 60_000)
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(300)
    window.settings_panel.temperature.setValue(0.0)  # greedy: this reply never ends its turn
    seen: list[tuple[bool, int, str]] = []
    reply = chat.send(window, "Tell me a story")
    reply.body.rendered.connect(
        lambda: seen.append((reply.streaming, len(reply.text), reply.figures.text()))
    )
    chat.wait_reply(window)

    partial = [entry for entry in seen if entry[0] and entry[1] > 0]
    assert partial, "no text was shown before the reply finished"
    assert min(length for _s, length, _f in partial) < len(reply.text)
    assert any("generating…" in figures for _s, _l, figures in partial)
    stored = _stored_reply(window)
    assert stored.state is MessageState.COMPLETE and stored.content == reply.text
    stats = stored.stats
    assert stats is not None and stats.generated_tokens == 300
    lines = reply.figures.text().split("\n")
    if not any(stats.drafted_by_depth):  # auto measured drafting slower here: no 0 % row,
        assert len(lines) == 1  # and the notice says why (once)
        assert reply.notice.text().startswith("Auto drafted 0: on this machine a draft ")
        return
    basics, mtp, auto = lines
    assert auto.startswith("Auto drafted ") and "× plain decoding's speed" in auto  # why so
    assert basics.startswith("300 tokens · ")
    assert f"{stats.decode_tokens_per_second:.1f} tok/s" in basics
    assert f"TTFT {stats.ttft_seconds * 1000:.0f} ms" in basics
    assert basics.endswith("max tokens")
    # The default depth is auto: up to AUTO_MAX_DEPTH drafts per cycle, chosen per cycle.
    assert stats.adaptive and stats.depth == AUTO_MAX_DEPTH
    assert mtp.startswith(
        f"MTP auto depth, {stats.mean_draft_depth:.2f} drafts/cycle (Leviathan–Chen) · "
        "acceptance by depth "
    )
    rates = mtp.split("acceptance by depth ")[1].split(" · ")[0].split(" / ")
    assert rates == [f"{rate:.0%}" for rate in stats.acceptance_by_depth]
    assert f"mean accepted {stats.mean_accepted_length:.2f}" in mtp
    assert f"{stats.tokens_per_cycle:.2f} tokens/cycle" in mtp
    assert reply.summary.text().startswith(
        f"300 tokens · {stats.decode_tokens_per_second:.1f} tok/s · MTP "
    )
    assert reply.regenerate_button.isVisibleTo(window)


@pytest.mark.slow
def test_the_model_bar_shows_the_model_facts_and_the_backend(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    info = window.model_bar.info.text()
    size = format_bytes(tiny_gguf.stat().st_size)
    assert info.startswith(f"qwen35 · {size} · MTP heads: 1 block(s) ✓ · memory ≈ ")
    assert "cache " in info and "for 4096 tokens" in info and "RAM" in info
    assert window.model_bar.picker.currentText() == "Opened: tiny-mtp.gguf"
    chat.qtbot.waitUntil(lambda: "(llama.cpp)" in window.model_bar.backend.text(), timeout=60_000)
    assert "CPU : " in window.model_bar.backend.toolTip()  # llama.cpp's own system info


@pytest.mark.slow
def test_a_reply_reads_clean_without_special_tokens(chat, reading_model: Path) -> None:
    window = chat.open()
    chat.load(window, reading_model)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(120)
    reply = chat.ask(window, "Return the number of lines in a text file.")
    assert reply.text.strip()
    rendered = reply.body.plain_text()
    for special in (*SPECIAL_TOKENS, "<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        assert special not in reply.text and special not in rendered
    assert _stored_reply(window).content == reply.text
    assert "tokens · " in reply.figures.text()


@pytest.mark.slow
def test_the_mtp_switch_and_depth_decide_how_the_reply_is_decoded(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    panel = window.settings_panel
    panel.max_tokens.setValue(40)
    panel.mtp_enabled.setChecked(False)
    plain = chat.ask(window, "plain please")
    assert "MTP " not in plain.figures.text()
    assert _stored_reply(window).stats.depth == 0
    panel.mtp_enabled.setChecked(True)
    panel.mtp_depth.setValue(2)
    drafted = chat.ask(window, "with two drafts")
    assert "MTP depth 2 (Leviathan–Chen)" in drafted.figures.text()
    assert _stored_reply(window).stats.depth == 2
    panel.accept.setCurrentIndex(panel.accept.findData("match"))
    matched = chat.ask(window, "sample and compare")
    assert "MTP depth 2 (sample-and-compare)" in matched.figures.text()


@pytest.mark.slow
def test_stop_mid_reply_keeps_the_partial_text(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(LONG_REPLY)
    window.settings_panel.temperature.setValue(0.0)  # greedy: no end of turn in LONG_REPLY
    reply = chat.send(window, "Never stop talking")
    chat.qtbot.waitUntil(lambda: len(reply.text) > 0, timeout=60_000)
    assert window.composer.stop_button.isVisible()
    chat.qtbot.mouseClick(window.composer.stop_button, Qt.MouseButton.LeftButton)
    chat.wait_reply(window)

    stored = _stored_reply(window)
    assert stored.finish_reason == "cancelled" and stored.state is MessageState.COMPLETE
    assert stored.content == reply.text and reply.text
    assert 0 < stored.stats.generated_tokens < LONG_REPLY
    assert reply.figures.text().split("\n")[0].endswith("stopped")
    assert window.composer.send_button.isVisible()


@pytest.mark.slow
def test_history_survives_closing_and_reopening_the_window(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(30)
    window.settings_panel.system_prompt.setPlainText("Answer in one line.")
    chat.ask(window, "First question")
    chat.ask(window, "Second question")
    before = [
        (m.role, m.text, m.summary.text(), m.figures.text()) for m in window.transcript.messages
    ]
    title = window.conversations.list.item(0).text().split("\n")[0]
    chat.close(window)

    reopened = chat.open()
    assert reopened.conversations.list.count() == 1
    assert reopened.conversations.list.item(0).text().startswith(title)
    assert title == "First question"
    after = [
        (m.role, m.text, m.summary.text(), m.figures.text()) for m in reopened.transcript.messages
    ]
    assert after == before
    assert reopened.settings_panel.system_prompt.toPlainText() == "Answer in one line."
    assert reopened.settings_panel.max_tokens.value() == 30


@pytest.mark.slow
def test_export_writes_what_the_conversation_holds(chat, tiny_gguf: Path, tmp_path: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(25)
    chat.ask(window, "Export me")
    chat.ask(window, "And me")
    conversation_id = window.conversations.current_id
    json_path = window.export_to(conversation_id, tmp_path / "chat.json")
    markdown_path = window.export_to(conversation_id, tmp_path / "chat.md")
    assert json_path is not None and markdown_path is not None
    document = json.loads(json_path.read_text(encoding="utf-8"))
    shown = [(m.role, m.text) for m in window.transcript.messages]
    assert [(m["role"], m["content"]) for m in document["messages"]] == shown
    markdown = markdown_path.read_bytes().decode("utf-8")
    for _role, text in shown:  # as a reader sees it: control characters shown, not obeyed
        assert markdown_text.block(text.strip("\n")).rstrip() in markdown
    assert "Exported to" in window.statusBar().currentMessage()


@pytest.mark.slow
def test_a_killed_worker_gives_a_message_and_the_next_message_works(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(LONG_REPLY)
    window.settings_panel.temperature.setValue(0.0)  # greedy: no end of turn in LONG_REPLY
    reply = chat.send(window, "Talk for a long time")
    chat.qtbot.waitUntil(lambda: len(reply.text) > 0, timeout=60_000)
    first_pid = window.bridge.worker_pid
    assert first_pid is not None
    os.kill(first_pid, signal.SIGKILL)
    chat.wait_reply(window)

    notice = reply.notice.text()
    assert reply.notice.isVisible()
    assert "stopped unexpectedly while generating with tiny-mtp.gguf (killed by SIGKILL)" in notice
    assert "The conversation is kept" in notice and "Traceback" not in notice
    assert "short of memory" in notice and "Max tokens" not in notice  # killed: memory, maybe
    assert reply.figures.text().split("\n")[0].endswith(" · failed")
    stored = window.store.conversation(window.conversations.current_id).messages
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].state is MessageState.FAILED and stored[-1].content == reply.text

    window.settings_panel.max_tokens.setValue(12)
    again = chat.ask(window, "Are you back?")
    assert not again.notice.isVisible()
    _assert_whole_reply(again, 12)
    assert window.bridge.worker_pid not in (None, first_pid)
    assert window.model_bar.state.text() == "Ready: tiny-mtp.gguf"


def _unknown_architecture_gguf(path: Path) -> Path:
    """A well-formed GGUF of an architecture llama.cpp does not know: it fails at load time."""
    writer = gguf.GGUFWriter(str(path), "notarealarch")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 16), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.slow
def test_a_model_that_fails_to_load_says_why_and_another_can_be_chosen(
    chat, tiny_gguf: Path, tmp_path: Path
) -> None:
    window = chat.open()
    strange = _unknown_architecture_gguf(tmp_path / "strange.gguf")
    window.open_model(strange)
    chat.qtbot.waitUntil(lambda: window.banner.isVisible(), timeout=60_000)
    assert window.model_bar.state.text() == "Could not load strange.gguf"
    banner = window.banner.text()
    assert "llama.cpp could not load" in banner and "strange.gguf" in banner
    assert "architecture" in banner and "Traceback" not in banner
    window.composer.editor.setPlainText("hello?")
    chat.qtbot.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    assert not window.streaming and window.composer.editor.toPlainText() == "hello?"

    truncated = tmp_path / "truncated.gguf"
    data = tiny_gguf.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])  # an interrupted download: header intact
    window.open_model(truncated)
    assert window.model_bar.state.text() == "Cannot load truncated.gguf"
    assert "truncated.gguf is incomplete" in window.banner.text()
    assert "download it again" in window.banner.text()

    chat.load(window, tiny_gguf)
    assert not window.banner.isVisible()
    window.settings_panel.max_tokens.setValue(10)
    _assert_whole_reply(chat.ask(window, "now it works"), 10)


def test_a_model_without_mtp_heads_runs_plain_and_says_why(
    chat, tiny_gguf_without_mtp: Path
) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf_without_mtp)
    panel = window.settings_panel
    assert not panel.mtp_enabled.isEnabled() and not panel.mtp_enabled.isChecked()
    assert "has no MTP block" in panel.mtp_enabled.toolTip()
    assert "MTP heads: none" in window.model_bar.info.text()
    panel.max_tokens.setValue(8)
    reply = chat.ask(window, "plain only")
    assert "MTP " not in reply.figures.text()
    assert reply.notice.isVisible() and "decoding runs autoregressively" in reply.notice.text()


@pytest.mark.slow
def test_regenerate_keeps_versions_and_edit_branches(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(40)
    first = chat.ask(window, "Say something")
    first_text = first.text
    chat.qtbot.mouseClick(first.regenerate_button, Qt.MouseButton.LeftButton)
    assert window.streaming
    again = chat.wait_reply(window)
    stored = window.store.conversation(window.conversations.current_id).messages
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].content == again.text != first_text
    assert again.version_label.isVisible() and again.version_label.text() == "2/2"
    chat.qtbot.mouseClick(again.previous_version, Qt.MouseButton.LeftButton)  # ‹ back to 1/2
    [_question, shown] = window.transcript.messages
    assert shown.text == first_text and shown.version_label.text() == "1/2"
    chat.qtbot.mouseClick(shown.next_version, Qt.MouseButton.LeftButton)
    assert window.transcript.messages[-1].text == again.text

    chat.ask(window, "A second question")
    question = window.transcript.messages[0]
    chat.qtbot.mouseClick(question.edit_button, Qt.MouseButton.LeftButton)
    assert question.editor.toPlainText() == "Say something"
    question.editor.setPlainText("Say something else")
    chat.qtbot.mouseClick(question.save_edit_button, Qt.MouseButton.LeftButton)
    chat.wait_reply(window)
    stored = window.store.conversation(window.conversations.current_id).messages
    assert (stored[0].role, stored[0].content) == ("user", "Say something else")
    assert len(stored) == 2 and stored[1].state is MessageState.COMPLETE
    assert [m.text for m in window.transcript.messages] == [m.content for m in stored]
    edited = window.transcript.messages[0]
    assert edited.version_label.text() == "2/2"  # the original is kept, with what followed it
    chat.qtbot.mouseClick(edited.previous_version, Qt.MouseButton.LeftButton)
    texts = [m.text for m in window.transcript.messages]
    assert texts[0] == "Say something" and texts[2] == "A second question" and len(texts) == 4


@pytest.mark.slow
def test_compare_mode_runs_plain_and_mtp_with_one_seed(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(80)
    window.composer.editor.setPlainText("Compare me")
    chat.qtbot.mouseClick(window.composer.compare_button, Qt.MouseButton.LeftButton)
    dialog = window.compare_dialog
    assert dialog is not None
    chat.qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=120_000)
    outcome = dialog.outcome
    assert outcome.outputs_match and len(outcome.plain.token_ids) == 80
    assert outcome.plain.seed == outcome.mtp.seed
    # The MTP side runs the default depth, auto: up to AUTO_MAX_DEPTH drafts per cycle.
    assert outcome.plain.stats.depth == 0 and outcome.mtp.stats.depth == AUTO_MAX_DEPTH
    assert dialog.verdict.text().startswith("<b>identical outputs: 80 tokens match · MTP ")
    assert dialog.plain.figures.text().startswith("80 tokens")
    assert "MTP auto depth" in dialog.mtp.figures.text()
    assert window.store.conversations() == []  # compare runs are not part of the history


@pytest.mark.slow
def test_conversations_can_be_searched_renamed_and_deleted(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(5)
    chat.ask(window, "About fibonacci")
    window.new_conversation()
    chat.ask(window, "About regex")
    listing = window.conversations.list
    assert [listing.item(i).text().split("\n")[0] for i in range(listing.count())] == [
        "About regex",
        "About fibonacci",
    ]
    window.conversations.search.setText("fibo")
    assert listing.count() == 1
    fibonacci_id = window.conversations.current_id or int(
        listing.item(0).data(Qt.ItemDataRole.UserRole)
    )
    window.conversations.search.clear()
    window.rename(fibonacci_id, "Fib")
    assert "Fib\n" in [listing.item(i).text()[:4] for i in range(listing.count())]
    window.delete_conversation(fibonacci_id)
    assert listing.count() == 1 and listing.item(0).text().startswith("About regex")


@pytest.mark.slow
def test_copy_puts_the_reply_text_on_the_clipboard(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(20)
    reply = chat.ask(window, "Copy me")
    QGuiApplication.clipboard().clear()
    chat.qtbot.mouseClick(reply.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == reply.text != ""


@pytest.mark.slow
def test_the_system_prompt_is_sent_with_every_reply(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(4)
    chat.ask(window, "Hello")
    without = _stored_reply(window).stats.prompt_tokens
    window.new_conversation()
    window.settings_panel.system_prompt.setPlainText("You are terse.")
    chat.ask(window, "Hello")
    with_system = _stored_reply(window).stats.prompt_tokens
    system_turn = "<|im_start|>system\nYou are terse.<|im_end|>\n"  # the model's ChatML template
    backend = LlamaCppBackend(tiny_gguf, LoadSettings(threads=1, context_length=256))
    try:
        added = len(backend.tokenize(system_turn, parse_special=True))
    finally:
        backend.close()
    assert with_system - without == added > 0


@pytest.mark.slow
def test_a_damaged_history_still_lets_the_user_chat_and_says_why(
    chat, tiny_gguf: Path, home
) -> None:
    database = Path(home.root) / "mtp-studio" / "data" / "chat.sqlite3"
    database.parent.mkdir(parents=True, exist_ok=True)
    database.write_bytes(b"not a database" * 200)
    window = chat.open()
    assert window.banner.isVisible()
    assert "cannot open the chat history" in window.banner.text()
    assert "kept in" in window.banner.text() and "instead" in window.banner.text()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(5)
    _assert_whole_reply(chat.ask(window, "still works"), 5)
    assert database.read_bytes() == b"not a database" * 200


def test_a_new_models_folder_in_settings_is_searched_at_once(
    chat, tiny_gguf: Path, tmp_path: Path
) -> None:
    window = chat.open()
    folder = tmp_path / "my-models"
    folder.mkdir()
    shutil.copyfile(tiny_gguf, folder / "mine.gguf")
    window.apply_settings(replace(Settings(), models_dir=str(folder)))  # saved in Settings
    chat.qtbot.waitUntil(
        lambda: any(m.path == folder / "mine.gguf" for m in window.model_bar.models),
        timeout=30_000,
    )
    found = next(m for m in window.model_bar.models if m.path == folder / "mine.gguf")
    assert found.origin == "downloaded" and found.mtp_blocks == 1


@pytest.mark.slow
def test_closing_the_window_mid_reply_keeps_the_text_so_far(chat, tiny_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, tiny_gguf)
    window.settings_panel.max_tokens.setValue(LONG_REPLY)
    window.settings_panel.temperature.setValue(0.0)  # greedy: no end of turn in LONG_REPLY
    reply = chat.send(window, "Keep going while I close")
    chat.qtbot.waitUntil(lambda: len(reply.text) > 0, timeout=60_000)
    chat.close(window)

    reopened = chat.open()
    stored = reopened.store.conversation(reopened.conversations.current_id).messages[-1]
    assert stored.state is MessageState.COMPLETE and stored.finish_reason == "cancelled"
    assert stored.content.startswith(reply.text) and stored.content
    assert reopened.transcript.messages[-1].text == stored.content
    assert reopened.transcript.messages[-1].figures.text().split("\n")[0].endswith("stopped")
