"""Pictures in the chat window, as a user attaches, sends, reopens and edits them: with the Attach
button's file dialog, a drop on the window, a paste; sent to the bundled vision demo (its
projector beside it) through real llama.cpp in the worker; kept with the conversation; and
refused in one line by a model without a projector, or when the file is hostile.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication

from app.engine.chat.attachments import placed_first, read_attachment
from app.engine.chat.conversation import ChatSettings
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL, DEMO_VISION_PROJECTOR
from app.engine.units import format_bytes
from app.ui.chat.controls.attachment_control import MAX_PICTURES
from tests.vision.conftest import picture, png_declaring

TEXT_ONLY_REASON_END = "choose one with the Projector button in the model bar"


def write_picture(
    folder: Path, name: str, seed: int, size=(96, 64), image_format="PNG", **save
) -> Path:
    path = folder / name
    path.write_bytes(picture(*size, seed=seed, image_format=image_format, **save))
    return path


def open_vision_chat(chat):
    window = chat.open()
    chat.load(window, DEMO_VISION_MODEL)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(12)
    window.settings_panel.use_depth(2)  # MTP drafts after the picture (auto may choose none)
    return window


def attach_with_the_button(chat, window, *paths: Path) -> None:
    """Press Attach pictures…, choose ``paths`` in the file dialog, wait for their thumbnails."""
    waiting = len(window.composer.attachments.tiles)
    chat.qtbot.mouseClick(window.composer.attach_button, Qt.MouseButton.LeftButton)
    dialog = window.attachments.dialog
    assert dialog is not None and dialog.isVisible()
    dialog.selectFile(" ".join(f'"{path}"' for path in paths))
    dialog.accept()
    tiles = window.composer.attachments.tiles
    chat.qtbot.waitUntil(lambda: len(tiles) == waiting + len(paths) and tiles[-1].loaded)


@pytest.mark.slow
def test_the_model_bar_names_the_projector_and_a_picture_goes_to_the_vision_demo(
    chat, tmp_path: Path
) -> None:
    window = open_vision_chat(chat)
    row = window.model_bar.projector_row
    size = format_bytes(DEMO_VISION_PROJECTOR.stat().st_size)
    chat.qtbot.waitUntil(lambda: DEMO_VISION_PROJECTOR.name in row.label.text())
    assert row.label.text().endswith(f"{DEMO_VISION_PROJECTOR.name} ({size})")
    assert str(DEMO_VISION_PROJECTOR) in row.label.toolTip()
    assert window.composer.attach_button.isEnabled()

    photo = write_picture(tmp_path, "photo.png", seed=1)
    attach_with_the_button(chat, window, photo)
    [pending] = window.composer.attachments.tiles
    assert "PNG · 96×64 px" in pending.button.toolTip()
    reply = chat.ask(window, "What is in the picture?")
    assert window.composer.attachments.tiles == [] and not window.composer.attachments.isVisible()
    stored = window.store.conversation(window.conversations.current_id).messages
    assert stored[0].images == placed_first([read_attachment(photo)])
    assert stored[1].content == reply.text and reply.text
    reply.details_button.setChecked(True)
    assert "(1 picture encoded)" in reply.prompt.text()
    first_text, first_prompt = reply.text, prompt_tokens(reply)

    question = window.transcript.messages[0]
    [shown] = question.pictures.tiles
    chat.qtbot.waitUntil(lambda: shown.loaded)
    assert shown.button.iconSize().width() == 160  # the thumbnail in the sent message
    viewer = shown.open_viewer()  # a click shows it larger
    chat.qtbot.waitUntil(lambda: viewer.loaded)
    assert viewer.image_label.pixmap().size().toTuple() == (96, 64)
    viewer.close()

    # Regenerate asks about the same picture again: the same prompt, picture included.
    chat.qtbot.mouseClick(reply.regenerate_button, Qt.MouseButton.LeftButton)
    again = chat.wait_reply(window)
    again.details_button.setChecked(True)
    assert again.text == first_text  # greedy, the same prompt with the same picture
    assert prompt_tokens(again) == first_prompt
    assert "(1 picture encoded)" in again.prompt.text()

    # A follow-up finds the picture in the state kept since: it is not encoded again.
    follow_up = chat.ask(window, "And the colours?")
    follow_up.details_button.setChecked(True)
    assert "reused from earlier turns" in follow_up.prompt.text()
    assert "picture" not in follow_up.prompt.text()

    # The same question without the picture is a shorter prompt: the picture filled cells.
    window.new_conversation()
    plain = chat.ask(window, "What is in the picture?")
    assert prompt_tokens(plain) < first_prompt


def prompt_tokens(reply) -> int:
    """The prompt's size, from the reply's Details ("Prompt: 33 tokens, …")."""
    return int(reply.prompt.text().split(" tokens")[0].removeprefix("Prompt: ").replace(",", ""))


@pytest.mark.slow
def test_a_reopened_conversation_shows_its_picture(chat, tmp_path: Path) -> None:
    window = open_vision_chat(chat)
    photo = write_picture(tmp_path, "kept.webp", seed=2, image_format="WEBP", lossless=True)
    attach_with_the_button(chat, window, photo)
    chat.ask(window, "Describe it")
    chat.close(window)

    reopened = chat.open()  # the most recent conversation opens
    question = reopened.transcript.messages[0]
    [tile] = question.pictures.tiles
    chat.qtbot.waitUntil(lambda: tile.loaded)  # made from the stored bytes, in the background
    assert tile.picture.sha256 == read_attachment(photo).sha256
    width, height = tile.button.iconSize().toTuple()  # 96×64 shown 160 px wide
    assert width == 160 and abs(height - 160 * 64 / 96) < 1
    assert question.text == "Describe it"


def drag_and_drop(target, mime: QMimeData) -> bool:
    """Drag ``mime`` over ``target`` and drop it there; whether the drop was accepted."""
    point = QPoint(10, 10)
    actions = Qt.DropAction.CopyAction
    enter = QDragEnterEvent(
        point, actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(target, enter)
    drop = QDropEvent(
        QPointF(point), actions, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(target, drop)
    return enter.isAccepted() and drop.isAccepted()


@pytest.mark.slow
def test_pictures_dropped_on_the_window_or_the_message_box_wait_to_be_sent(
    chat, tmp_path: Path
) -> None:
    window = open_vision_chat(chat)
    files = [write_picture(tmp_path, f"drop-{n}.jpg", seed=n, image_format="JPEG") for n in (3, 4)]
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in files])
    assert drag_and_drop(window, mime)
    tiles = window.composer.attachments.tiles
    chat.qtbot.waitUntil(lambda: len(tiles) == 2 and all(tile.loaded for tile in tiles))
    assert [tile.picture.sha256 for tile in tiles] == [read_attachment(p).sha256 for p in files]

    from_app = QMimeData()  # a picture dragged out of another app: its encoded bytes
    from_app.setData("image/png", picture(40, 30, seed=5))
    assert drag_and_drop(window.composer.editor.viewport(), from_app)
    chat.qtbot.waitUntil(lambda: len(tiles) == 3 and tiles[-1].loaded)
    assert window.composer.editor.toPlainText() == ""  # nothing typed into the box

    chat.qtbot.mouseClick(tiles[0].remove_button, Qt.MouseButton.LeftButton)  # its ×
    assert len(window.composer.attachments.tiles) == 2
    chat.qtbot.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)  # no text
    chat.wait_reply(window)
    [question, _reply] = window.store.conversation(window.conversations.current_id).messages
    assert question.content == "" and len(question.images) == 2
    assert window.conversations.list.currentItem().text().startswith("A picture")


@pytest.mark.slow
def test_a_pasted_picture_waits_and_pasted_text_is_typed(chat) -> None:
    window = open_vision_chat(chat)
    editor = window.composer.editor
    editor.setFocus()
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.darkCyan)
    QGuiApplication.clipboard().setImage(image)
    chat.qtbot.keyClick(editor, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    tiles = window.composer.attachments.tiles
    chat.qtbot.waitUntil(lambda: len(tiles) == 1 and tiles[0].loaded)
    assert (tiles[0].picture.media_type, tiles[0].picture.width) == ("image/png", 64)
    assert editor.toPlainText() == ""

    QGuiApplication.clipboard().setText("What colour is it?")
    chat.qtbot.keyClick(editor, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert editor.toPlainText() == "What colour is it?" and len(tiles) == 1


@pytest.mark.slow
def test_hostile_files_are_refused_in_one_line_and_nothing_waits(chat, tmp_path: Path) -> None:
    window = open_vision_chat(chat)
    whole = picture(200, 150, seed=6)
    cut = tmp_path / "cut.png"
    cut.write_bytes(whole[: len(whole) // 2])
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_declaring(100_000, 100_000))
    gif = tmp_path / "moving.gif"
    Image.new("RGB", (8, 8)).save(gif, format="GIF")
    expected = {
        cut: "cut.png: the image is damaged or cut short",
        bomb: "bomb.png: the image declares too many pixels",
        gif: "moving.gif: the image is GIF, not PNG, JPEG or WebP",
        tmp_path / "gone.png": f"cannot read the picture {tmp_path / 'gone.png'}",
    }
    for path, start in expected.items():
        window.banner.hide()
        window.attachments.attach_files([path])
        chat.qtbot.waitUntil(lambda: not window.attachments.reading)
        assert window.banner.isVisible() and window.banner.text().startswith(start)
        assert "\n" not in window.banner.text()
        assert window.composer.attachments.tiles == []

    many = [write_picture(tmp_path, f"many-{n}.png", seed=n) for n in range(MAX_PICTURES + 1)]
    window.attachments.attach_files(many)
    assert window.banner.text().startswith(f"A message takes at most {MAX_PICTURES} pictures")


@pytest.mark.slow
def test_a_model_without_a_projector_says_so_in_one_line(chat, tmp_path: Path, tiny_gguf) -> None:
    window = open_vision_chat(chat)
    attach_with_the_button(chat, window, write_picture(tmp_path, "waiting.png", seed=7))
    chat.load(window, tiny_gguf)  # another model, with no mmproj beside it

    reason = (
        "tiny-mtp.gguf has no vision projector (no mmproj-*.gguf beside the model file), so it "
        f"cannot read images; {TEXT_ONLY_REASON_END}"
    )
    button = window.composer.attach_button  # set when the load's news reaches the window
    chat.qtbot.waitUntil(lambda: not button.isEnabled() and button.toolTip() == reason)
    assert window.banner.isVisible() and window.banner.text() == reason  # a picture waits
    row = window.model_bar.projector_row
    chat.qtbot.waitUntil(lambda: row.label.toolTip() == reason)
    assert "none" in row.label.text()
    window.composer.editor.setPlainText("And now?")
    chat.qtbot.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    assert not window.streaming and window.banner.text() == reason

    window.composer.attachments.clear()  # a conversation that shows a picture is refused too
    window.banner.hide()
    conversation = window.store.create_conversation("Old pictures", ChatSettings())
    photo = read_attachment(write_picture(tmp_path, "old.png", seed=8))
    window.store.add_user_message(conversation, "Look", placed_first([photo]))
    window.open_conversation(conversation)
    chat.qtbot.mouseClick(window.composer.send_button, Qt.MouseButton.LeftButton)
    assert not window.streaming and window.banner.text() == reason
    window.attachments.attach_files([tmp_path / "old.png"])  # offered anyway: the same line
    assert window.composer.attachments.tiles == [] and window.banner.text() == reason


@pytest.mark.slow
def test_the_projector_can_be_turned_off_and_on_in_the_model_bar(chat) -> None:
    window = open_vision_chat(chat)
    row = window.model_bar.projector_row
    chat.qtbot.waitUntil(lambda: DEMO_VISION_PROJECTOR.name in row.label.text())
    texts = [action.text() for action in row.menu.actions() if action.text()]
    size = format_bytes(DEMO_VISION_PROJECTOR.stat().st_size)
    projector = f"{DEMO_VISION_PROJECTOR.name} ({size})"
    assert texts == [projector, "No projector (text only)", "Another file…"]
    row.menu.actions()[1].trigger()  # No projector: the model loads again, for text only
    chat.qtbot.waitUntil(lambda: not window.composer.attach_button.isEnabled(), timeout=60_000)
    assert window.composer.attach_button.toolTip() == (
        "demo-vision-Q8_0.gguf was loaded for text only (images turned off)"
    )
    chat.qtbot.waitUntil(lambda: "text only" in row.label.toolTip())
    assert row.menu.actions()[1].isChecked()

    again = chat.open()  # the choice is kept for the model
    chat.load(again, DEMO_VISION_MODEL)
    assert not again.composer.attach_button.isEnabled()
    row = again.model_bar.projector_row
    chat.qtbot.waitUntil(lambda: "text only" in row.label.toolTip())
    assert [a.text() for a in row.menu.actions() if a.isChecked()] == ["No projector (text only)"]
    row.menu.actions()[0].trigger()
    chat.qtbot.waitUntil(lambda: again.composer.attach_button.isEnabled(), timeout=60_000)
    chat.qtbot.waitUntil(lambda: DEMO_VISION_PROJECTOR.name in row.label.text(), timeout=60_000)


@pytest.mark.slow
def test_edit_keeps_the_pictures_or_replaces_them(chat, tmp_path: Path) -> None:
    window = open_vision_chat(chat)
    first = write_picture(tmp_path, "first.png", seed=9)
    attach_with_the_button(chat, window, first)
    chat.ask(window, "What is this?")

    question = window.transcript.messages[0]
    chat.qtbot.mouseClick(question.edit_button, Qt.MouseButton.LeftButton)
    assert question.edit_pictures.pictures() == question.pictures.pictures()
    question.editor.setPlainText("What is this, exactly?")
    chat.qtbot.mouseClick(question.save_edit_button, Qt.MouseButton.LeftButton)
    chat.wait_reply(window)
    messages = window.store.conversation(window.conversations.current_id).messages
    assert messages[0].content == "What is this, exactly?"
    assert messages[0].images == placed_first([read_attachment(first)])  # kept

    second = write_picture(tmp_path, "second.png", seed=10)
    question = window.transcript.messages[0]
    chat.qtbot.mouseClick(question.edit_button, Qt.MouseButton.LeftButton)
    chat.qtbot.mouseClick(question.edit_pictures.tiles[0].remove_button, Qt.MouseButton.LeftButton)
    chat.qtbot.mouseClick(question.add_pictures_button, Qt.MouseButton.LeftButton)
    dialog = window.attachments.dialog
    dialog.selectFile(str(second))
    dialog.accept()
    chat.qtbot.waitUntil(lambda: len(question.edit_pictures.tiles) == 1)
    chat.qtbot.mouseClick(question.save_edit_button, Qt.MouseButton.LeftButton)
    chat.wait_reply(window)
    messages = window.store.conversation(window.conversations.current_id).messages
    assert messages[0].images == placed_first([read_attachment(second)])  # replaced
    assert window.transcript.messages[0].version_label.text() == "3/3"
