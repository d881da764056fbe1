"""How full the model's context is: "Context 3,120 / 4,096 tokens", a thin bar, and what happens
when it is full.

The figure is the conversation as the model last read it (the last reply's prompt and its text;
:func:`app.engine.chat.conversation.context_in_use`), against the loaded model's context window.
From :data:`NEARLY_FULL` the line says what the next turns will do — leave out the oldest turns,
or fail — and offers "Drop the oldest turns" when that is off.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

NEARLY_FULL = 0.85
BAR_WIDTH = 90


class ContextMeter(QWidget):
    """``drop_oldest_requested`` when the user asks to drop the oldest turns from here."""

    drop_oldest_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextMeter")
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedWidth(BAR_WIDTH)
        self.label = QLabel()
        self.label.setObjectName("contextUse")
        self.label.setWordWrap(True)
        self.drop_button = QPushButton("Drop the oldest turns")
        self.drop_button.setToolTip(
            "Leave out the oldest turns when the conversation no longer fits (this conversation)"
        )
        self.drop_button.clicked.connect(self.drop_oldest_requested.emit)
        self.drop_button.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.drop_button)
        self.show_use(None, None, drop_oldest=True)

    def show_use(self, used: int | None, context: int | None, *, drop_oldest: bool) -> None:
        """``used`` tokens of ``context`` (None: not known yet)."""
        if not context:
            self.hide()
            return
        self.show()
        used = used or 0
        share = min(used / context, 1.0)
        self.bar.setRange(0, context)
        self.bar.setValue(min(used, context))
        text = f"Context {used:,} / {context:,} tokens"
        full = share >= NEARLY_FULL
        if full and drop_oldest:
            text += " — nearly full: the oldest turns will be left out"
        elif full:
            text += " — nearly full: the next turns may not fit"
        self.label.setText(text)
        self.label.setProperty("tone", "warning" if full else "muted")
        self.label.style().unpolish(self.label)
        self.label.style().polish(self.label)
        self.drop_button.setVisible(full and not drop_oldest)
