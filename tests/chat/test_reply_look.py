"""What a reply looks like: code blocks highlighted with a Copy button each, HTML kept as text,
a half-written fence while streaming, the user's bubble, and the cut of a reply into prose and
code. These render real stored replies; the tests with the model are in
test_reply_figures.py."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QTextDocument
from PySide6.QtWidgets import QApplication

from app.engine.chat.conversation import ASSISTANT, USER, MessageState, StoredMessage
from app.engine.runtime.core.stats import StatsRecorder
from app.ui.chat.transcript.code_block import DARK_STYLE, LIGHT_STYLE
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.transcript.reply_body import ReplyBody
from app.ui.chat.transcript.reply_segments import Segment, split_reply

PYTHON_CODE = 'def count_lines(path: str) -> int:\n    return len(open(path).read().split("\\n"))'
SHELL_CODE = "wc -l notes.txt  # prints <count> & the name\n\necho done"
REPLY = (
    "Two ways to count lines:\n\n"
    f"```python\n{PYTHON_CODE}\n```\n\n"
    "and from the shell:\n\n"
    f"~~~~ bash  title=x\n{SHELL_CODE}\n~~~~\n\n"
    "That's all."
)


def _reply(content: str, role: str = ASSISTANT) -> StoredMessage:
    return StoredMessage(1, 1, role, content, MessageState.COMPLETE, time.time(), "demo-mtp")


def _transcript(qtbot, *messages: StoredMessage) -> TranscriptView:
    """A shown transcript; keep it referenced while its message widgets are used."""
    view = TranscriptView()
    view.resize(800, 600)
    qtbot.addWidget(view)
    view.show_messages(messages)
    view.show()
    qtbot.waitExposed(view)
    return view


def _colours(document: QTextDocument) -> set[str]:
    """The foreground colours the text is drawn in (a span without one counts as none)."""
    colours = set()
    block = document.begin()
    while block.isValid():
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            if fragment.text().strip() and fragment.charFormat().hasProperty(
                fragment.charFormat().Property.ForegroundBrush
            ):
                colours.add(fragment.charFormat().foreground().color().name())
            iterator += 1
        block = block.next()
    return colours


def test_two_code_blocks_are_highlighted_and_each_copy_button_copies_its_code(qtbot) -> None:
    view = _transcript(qtbot, _reply(REPLY))
    reply = view.messages[0]
    blocks = reply.body.code_blocks
    assert [block.language_label.text() for block in blocks] == ["python", "bash"]
    assert [block.view.toPlainText() for block in blocks] == [PYTHON_CODE, SHELL_CODE]
    assert len(_colours(blocks[0].view.document())) >= 3  # keywords, names, strings …
    assert len(_colours(blocks[1].view.document())) >= 2  # the comment at least
    prose = "\n".join(view.toPlainText() for view in reply.body.text_views)
    assert "Two ways to count lines:" in prose and "That's all." in prose and "```" not in prose
    for block, code in zip(blocks, (PYTHON_CODE, SHELL_CODE), strict=True):
        QGuiApplication.clipboard().clear()
        qtbot.mouseClick(block.copy_button, Qt.MouseButton.LeftButton)
        assert QGuiApplication.clipboard().text() == code
    QGuiApplication.clipboard().clear()
    qtbot.mouseClick(reply.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == REPLY  # the message's Copy: all its Markdown


def test_raw_html_in_a_reply_stays_text(qtbot) -> None:
    html = '<b>bold</b> <img src="file:///etc/passwd"> <a href="https://x">x</a>'
    content = f"{html}\n\n```html\n{html}\n```\n\n```\n<script>alert(1)</script>\n```"
    view = _transcript(qtbot, _reply(content))
    reply = view.messages[0]
    prose = reply.body.text_views[0]
    assert prose.toPlainText().strip() == html
    assert "<img" not in prose.toHtml() and "&lt;img" in prose.toHtml()
    html_block, plain_block = reply.body.code_blocks
    assert html_block.view.toPlainText() == html and "<img" not in html_block.view.toHtml()
    assert plain_block.language_label.text() == "code"
    assert plain_block.view.toPlainText() == "<script>alert(1)</script>"


def test_code_follows_the_palette_between_light_and_dark(qtbot) -> None:
    view = _transcript(qtbot, _reply(REPLY))
    reply = view.messages[0]
    block = reply.body.code_blocks[0]
    light_colours = _colours(block.view.document())
    assert block.highlight_style == LIGHT_STYLE  # offscreen Fusion starts light
    dark = QPalette(QApplication.palette())
    dark.setColor(QPalette.ColorRole.Window, QColor("#1e1e1e"))
    dark.setColor(QPalette.ColorRole.Text, QColor("#e0e0e0"))
    block.setPalette(dark)
    assert block.highlight_style == DARK_STYLE
    assert _colours(block.view.document()) - light_colours  # new colours for a dark background
    assert block.view.toPlainText() == PYTHON_CODE


def test_a_half_written_fence_shows_as_code_while_it_streams(qtbot) -> None:
    body = ReplyBody()
    qtbot.addWidget(body)
    body.set_markdown("Here:\n\n```pyth")
    assert [block.language for block in body.code_blocks] == ["pyth"]
    assert body.code_blocks[0].code == ""
    body.set_markdown("Here:\n\n```python\nfor line in fi")
    first = body.code_blocks[0]
    assert first.language == "python" and first.code == "for line in fi"
    body.set_markdown("Here:\n\n```python\nfor line in file:\n    print(line)\n```\n\nDone.")
    assert body.code_blocks == [first]  # the same widget, updated in place
    assert first.code == "for line in file:\n    print(line)"
    assert body.text_views[-1].toPlainText().strip() == "Done."
    body.set_markdown("Only prose now.")
    assert body.code_blocks == [] and body.plain_text().strip() == "Only prose now."


def test_a_streaming_reply_re_renders_only_what_changed(qtbot) -> None:
    view = _transcript(qtbot, _reply("…"))
    reply = view.messages[0]
    reply.begin_stream(1)
    stats = StatsRecorder(mode="lc", depth=0).snapshot()
    reply.append(REPLY[: REPLY.index("and from")], stats)
    first_block = reply.body.code_blocks[0]
    rendered_html = first_block.view.toHtml()
    reply.append(REPLY[REPLY.index("and from") :], stats)
    qtbot.waitUntil(lambda: len(reply.body.code_blocks) == 2, timeout=5_000)
    assert reply.body.code_blocks[0] is first_block
    assert first_block.view.toHtml() == rendered_html


def test_the_users_message_is_a_bubble_on_the_right(qtbot) -> None:
    view = _transcript(qtbot, _reply("Short question?", USER), _reply(REPLY))
    user, assistant = view.messages
    qtbot.waitUntil(lambda: user.bubble.width() < user.width() * 0.75)
    assert user.objectName() == "userMessage" and assistant.objectName() == "assistantMessage"
    assert user.bubble.geometry().right() > user.width() - 20  # right-aligned
    assert user.bubble.geometry().left() > user.width() / 2  # as wide as its short text
    assert not user.header.isVisible() and assistant.header.text() == "<b>demo-mtp</b>"
    assert assistant.body.width() > view.viewport().width() * 0.9  # the reply: full width
    long_view = _transcript(qtbot, _reply("word " * 400, USER))
    long = long_view.messages[0]
    qtbot.waitUntil(lambda: long.bubble.width() == int(long.width() * 0.75))


def test_a_reply_is_cut_into_prose_and_code() -> None:
    assert split_reply("just text") == (Segment("just text"),)
    assert split_reply("a\n```py\nx = 1\n```\nb") == (
        Segment("a"),
        Segment("x = 1", "py"),
        Segment("b"),
    )
    # A closing fence must use the fence's character and be at least as long.
    assert split_reply("````\n```\n~~~\n````") == (Segment("```\n~~~", ""),)
    assert split_reply("```js\nopen") == (Segment("open", "js", closed=False),)
    # Inline code is not a fence; a fence indented as a list item's stays prose.
    assert split_reply("``` a`b ```") == (Segment("``` a`b ```"),)
    listed = "- item\n\n    ```\n    x\n    ```"
    assert split_reply(listed) == (Segment(listed),)
