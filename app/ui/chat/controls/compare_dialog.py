"""Compare mode: the same prompt answered with plain decoding and with MTP, side by side.

Both runs use the conversation's context, its sampling settings and one seed (drawn once when
the conversation has none), one after the other on the same worker so neither slows the other.
Each side streams with its live figures; at the end a verdict line says whether the outputs are
identical and how much faster MTP was — and, when the depth was "auto" and it drafted nothing,
why (drafting measured slower than plain decoding on this machine), so "MTP 0.74x plain" does
not read as MTP being broken. The MTP side's depth can be changed (a fixed depth always drafts)
and the pair run again. Compare runs are not added to the conversation.
"""

from __future__ import annotations

import html
import secrets

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.compare import CompareOutcome
from app.engine.chat.conversation import ChatSettings, StoredMessage, reply_request
from app.engine.chat.figures import auto_depth_line, drafted_nothing, reply_figures
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.core.stats import DecodeStats
from app.engine.runtime.speculative.depth_policy import AUTO
from app.ui.chat.bridges.runtime_bridge import ReplyTicket, RuntimeBridge
from app.ui.chat.transcript.reply_body import ReplyBody
from app.ui.look.tones import tone_style
from app.ui.wording import in_window_words

SEED_BITS = 31
MAX_COMPARE_DEPTH = 4


class _Side(QWidget):
    """One column: a title, the streamed text and its figures."""

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title = QLabel(f"<b>{title}</b>")
        self.body = ReplyBody()
        self.figures = QLabel("waiting…")
        self.figures.setWordWrap(True)
        self.figures.setStyleSheet("color: palette(placeholder-text);")
        self.text = ""

    def reset(self) -> None:
        self.text = ""
        self.body.set_plain("")
        self.figures.setText("waiting…")

    def append(self, text: str, stats: DecodeStats) -> None:
        self.text += text
        self.body.set_plain(self.text)
        self.figures.setText("\n".join(reply_figures(stats, None).lines()))

    def finish(self, result: GenerationResult) -> None:
        self.text = result.text
        self.body.set_markdown(result.text)
        self.figures.setText("\n".join(reply_figures(result.stats, result.finish_reason).lines()))

    def fail(self, message: str) -> None:
        self.figures.setText(message)
        self.figures.setStyleSheet(tone_style("error"))


class CompareDialog(QDialog):
    plain_finished = Signal(DecodeStats)
    """The plain run's figures, which measure the model's plain speed."""

    def __init__(
        self,
        bridge: RuntimeBridge,
        settings: ChatSettings,
        context: tuple[StoredMessage, ...],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare plain decoding and MTP")
        self.resize(1000, 640)
        self._bridge = bridge
        self._settings = settings
        self._context = context
        self._tickets: list[ReplyTicket] = []
        self._results: dict[str, GenerationResult] = {}
        self.outcome: CompareOutcome | None = None

        self.plain = _Side("Plain decoding")
        self.mtp = _Side(f"MTP, depth {settings.mtp_depth}")
        self.depth = QComboBox()
        self.depth.setToolTip("The MTP side's draft depth: auto, or drafting N tokens per cycle")
        self.depth.addItem("auto", AUTO)
        for depth in range(1, MAX_COMPARE_DEPTH + 1):
            self.depth.addItem(str(depth), depth)
        self.depth.setCurrentIndex(max(self.depth.findData(settings.mtp_depth), 0))
        self.setup = QLabel()
        self.setup.setWordWrap(True)
        self.verdict = QLabel("Running…")
        self.verdict.setObjectName("compareVerdict")
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid = QGridLayout()
        for column, side in enumerate((self.plain, self.mtp)):
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setWidget(_top_aligned(side.body))
            grid.addWidget(side.title, 0, column)
            grid.addWidget(scroll, 1, column)
            grid.addWidget(side.figures, 2, column, Qt.AlignmentFlag.AlignTop)
        grid.setRowStretch(1, 1)
        self.run_again = QPushButton("Run again")
        self.run_again.clicked.connect(self.start)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.run_again, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        bottom = QHBoxLayout()
        bottom.addWidget(QLabel("MTP depth"))
        bottom.addWidget(self.depth)
        bottom.addStretch(1)
        bottom.addWidget(buttons)
        layout = QGridLayout(self)
        layout.addWidget(self.setup, 0, 0)
        layout.addLayout(grid, 1, 0)
        layout.addWidget(self.verdict, 2, 0)
        layout.addLayout(bottom, 3, 0)
        layout.setRowStretch(1, 1)

    def start(self) -> None:
        """Run plain then MTP with one seed."""
        self._stop()
        self._results = {}
        self.outcome = None
        seed = self._settings.seed
        if seed is None:
            seed = secrets.randbits(SEED_BITS)
        self.setup.setText(
            f"Same context, temperature {self._settings.temperature:g}, top-p "
            f"{self._settings.top_p:g}, top-k {self._settings.top_k}, min-p "
            f"{self._settings.min_p:g}, seed {seed}, at most {self._settings.max_tokens} tokens."
        )
        self.verdict.setText("Running plain decoding, then MTP…")
        self.run_again.setEnabled(False)
        mtp_depth = self.depth.currentData()
        self.mtp.title.setText(f"<b>MTP, depth {mtp_depth}</b>")
        for side, depth in ((self.plain, 0), (self.mtp, mtp_depth)):
            side.reset()
            request = reply_request(self._settings, self._context, mtp_depth=depth, seed=seed)
            ticket = ReplyTicket(request)
            ticket.chunk.connect(side.append)
            ticket.finished.connect(side.finish)
            ticket.finished.connect(self._finished)
            ticket.failed.connect(side.fail)
            ticket.failed.connect(self._failed)
            self._tickets.append(ticket)
            self._bridge.generate(ticket)

    def _finished(self, result: GenerationResult) -> None:
        ticket = self.sender()
        if ticket not in self._tickets:
            return  # a run that "Run again" replaced
        side = "plain" if self._tickets.index(ticket) == 0 else "mtp"
        self._results[side] = result
        if side == "plain":
            self.plain_finished.emit(result.stats)
        if len(self._results) == 2:
            mtp = self._results["mtp"]
            self.outcome = CompareOutcome(
                self._results["plain"], mtp, self._settings.temperature == 0
            )
            verdict = html.escape(self.outcome.verdict)
            if mtp.note:
                verdict += f"<br>MTP did not run: {html.escape(in_window_words(mtp.note))}"
            elif drafted_nothing(mtp.stats):
                why = auto_depth_line(mtp.stats) or ""
                verdict += (
                    f"<br>{html.escape(why)}. Choose a depth below and run again to compare "
                    "with drafting."
                )
            self.verdict.setText(f"<b>{verdict}</b>")
            self.run_again.setEnabled(True)
            self._tickets = []

    def _failed(self, _message: str) -> None:
        self.verdict.setText("The comparison could not finish; see the message above.")
        self.run_again.setEnabled(True)

    def _stop(self) -> None:
        for ticket in self._tickets:
            ticket.cancel()
        self._tickets = []

    def done(self, result: int) -> None:
        self._stop()
        super().done(result)


def _top_aligned(body: QWidget) -> QWidget:
    """``body`` at the top of a column that may be taller (a scroll area stretches what it
    holds: a code block's header then floated above its code)."""
    column = QWidget()
    layout = QVBoxLayout(column)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(body)
    layout.addStretch(1)
    return column
