"""The Home page: what MTP is, the first things to do, and what happened recently.

It is the first thing a new user sees (the window opens on it when nothing was saved), so it
explains the product in two sentences and offers the three starts that work offline or need
one step: chat with the bundled demo model, find a model in the catalog, sign in to publish.
Recent conversations and jobs let a returning user pick up where they left off. The page only
shows and asks: the main window decides what each request does.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.engine.chat.conversation import ConversationSummary
from app.ui.icons import icon
from app.ui.jobs.model import JobTableModel, state_text

RECENT_LIMIT = 6
MTP_EXPLAINED = (
    "Models such as Qwen3.5, DeepSeek V3 and GLM-4.5 are trained with small extra layers that "
    "predict the next few tokens at once. MTP Studio puts those layers back into the models you "
    "download and uses them to draft and check several tokens per step: replies come 2–2.5× "
    "faster, word for word the same."
)


class HomePage(QWidget):
    """Get-started cards and recent work. Signals say what the user asked for."""

    demo_chat_requested = Signal()
    catalog_requested = Signal()
    download_requested = Signal()
    models_requested = Signal()
    sign_in_requested = Signal()
    conversation_chosen = Signal(int)
    jobs_requested = Signal()

    def __init__(self, jobs: JobTableModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("homePage")
        self._jobs = jobs
        title = QLabel("Welcome to MTP Studio")
        title.setObjectName("pageTitle")
        explained = QLabel(MTP_EXPLAINED)
        explained.setObjectName("pageSubtitle")
        explained.setWordWrap(True)

        cards = self._build_cards()

        self.conversations = _recent_list("No conversations yet.")
        self.conversations.itemActivated.connect(self._conversation_activated)
        self.recent_jobs = _recent_list("No jobs yet.")
        self.recent_jobs.itemActivated.connect(lambda _item: self.jobs_requested.emit())
        recent = QHBoxLayout()
        recent.setSpacing(16)
        recent.addWidget(_section("Recent conversations", self.conversations), 1)
        recent.addWidget(_section("Recent jobs", self.recent_jobs), 1)

        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(32, 28, 32, 28)
        layout.setSpacing(14)
        layout.addWidget(title)
        layout.addWidget(explained)
        layout.addSpacing(8)
        layout.addLayout(cards)
        layout.addSpacing(8)
        layout.addLayout(recent)
        layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

        for signal in (jobs.rowsInserted, jobs.dataChanged, jobs.modelReset, jobs.rowsRemoved):
            signal.connect(self.show_jobs)
        self.show_jobs()

    def _build_cards(self) -> QGridLayout:
        """The three starts: try the demo, get a model, publish sidecars."""
        self.demo_button = _primary("Chat with the demo model")
        self.demo_button.clicked.connect(self.demo_chat_requested)
        self.catalog_button = QPushButton("Browse the catalog")
        self.catalog_button.clicked.connect(self.catalog_requested)
        self.download_button = QPushButton("Download a model…")
        self.download_button.setToolTip("Search the Hub for a model and get it ready for MTP")
        self.download_button.clicked.connect(self.download_requested)
        self.models_button = QPushButton("My models")
        self.models_button.clicked.connect(self.models_requested)
        self.sign_in_button = QPushButton("Sign in…")
        self.sign_in_button.clicked.connect(self.sign_in_requested)
        self.account = QLabel()
        self.account.setObjectName("muted")
        self.account.setWordWrap(True)
        self.demo_button.setIcon(icon("chat", QPalette.ColorRole.HighlightedText))
        for button, name in (
            (self.catalog_button, "catalog"),
            (self.download_button, "download"),
            (self.models_button, "models"),
            (self.sign_in_button, "key"),
        ):
            button.setIcon(icon(name))

        cards = QGridLayout()
        cards.setSpacing(16)
        cards.addWidget(
            _card(
                "Try it now",
                "A tiny model ships with the app: chat with it offline and watch MTP draft.",
                [self.demo_button],
            ),
            0,
            0,
        )
        cards.addWidget(
            _card(
                "Get a model",
                "Pick a model from the catalog, download it with its MTP sidecar, or manage "
                "what is already on disk.",
                [self.catalog_button, self.download_button, self.models_button],
            ),
            0,
            1,
        )
        publish_card = _card(
            "Publish sidecars",
            "Re-extract the MTP heads converters strip and share them on the Hugging Face Hub.",
            [self.sign_in_button],
        )
        publish_card.layout().insertWidget(2, self.account)  # type: ignore[union-attr]
        cards.addWidget(publish_card, 0, 2)
        for column in range(3):
            cards.setColumnStretch(column, 1)
        return cards

    def set_account(self, text: str, signed_in: bool) -> None:
        self.account.setText(text)
        self.sign_in_button.setText("Change account…" if signed_in else "Sign in…")

    def set_conversations(self, conversations: list[ConversationSummary]) -> None:
        self.conversations.clear()
        for summary in conversations[:RECENT_LIMIT]:
            item = QListWidgetItem(
                f"{summary.title}\n{_ago(summary.updated_at)} · {summary.message_count} messages"
            )
            item.setData(Qt.ItemDataRole.UserRole, summary.id)
            item.setToolTip("Open this conversation in the chat")
            self.conversations.addItem(item)
        _show_empty(self.conversations)

    def set_conversations_problem(self, reason: str) -> None:
        self.conversations.clear()
        item = QListWidgetItem(f"The chat history could not be read: {reason}")
        item.setFlags(Qt.ItemFlag.NoItemFlags)
        self.conversations.addItem(item)

    def show_jobs(self, *_args: object) -> None:
        self.recent_jobs.clear()
        for row in range(min(self._jobs.rowCount(QModelIndex()), RECENT_LIMIT)):
            job = self._jobs.job_at(row)
            when = job.record.finished_at or job.record.started_at or job.record.created_at
            item = QListWidgetItem(f"{job.record.spec.title}\n{state_text(job)} · {_ago(when)}")
            item.setData(Qt.ItemDataRole.UserRole, job.job_id)
            item.setToolTip("Show it in Jobs")
            self.recent_jobs.addItem(item)
        _show_empty(self.recent_jobs)

    def _conversation_activated(self, item: QListWidgetItem) -> None:
        conversation_id = item.data(Qt.ItemDataRole.UserRole)
        if isinstance(conversation_id, int):
            self.conversation_chosen.emit(conversation_id)


def _primary(text: str) -> QPushButton:
    button = QPushButton(text)
    button.setProperty("primary", True)
    button.setDefault(True)
    return button


def _card(title: str, text: str, buttons: list[QPushButton]) -> QFrame:
    card = QFrame()
    card.setObjectName("card")
    heading = QLabel(title)
    heading.setObjectName("sectionTitle")
    body = QLabel(text)
    body.setWordWrap(True)
    body.setObjectName("muted")
    layout = QVBoxLayout(card)
    layout.setContentsMargins(18, 16, 18, 16)
    layout.setSpacing(8)
    layout.addWidget(heading)
    layout.addWidget(body)
    layout.addStretch(1)
    for button in buttons:  # stacked: the cards keep their width on a small screen
        layout.addWidget(button)
    return card


def _section(title: str, widget: QWidget) -> QWidget:
    section = QWidget()
    heading = QLabel(title)
    heading.setObjectName("sectionTitle")
    layout = QVBoxLayout(section)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(6)
    layout.addWidget(heading)
    layout.addWidget(widget, 1)
    return section


def _recent_list(empty_text: str) -> QListWidget:
    recent = QListWidget()
    recent.setObjectName("recentList")
    recent.setProperty("emptyText", empty_text)
    recent.setWordWrap(True)
    recent.setMinimumHeight(140)
    recent.setMaximumHeight(320)
    _show_empty(recent)
    return recent


def _show_empty(recent: QListWidget) -> None:
    if recent.count() == 0:
        item = QListWidgetItem(str(recent.property("emptyText")))
        item.setFlags(Qt.ItemFlag.NoItemFlags)
        recent.addItem(item)


def _ago(when: float) -> str:
    seconds = max(0.0, time.time() - when)
    if seconds < 60:
        return "just now"
    size, unit = next(
        (size, unit)
        for size, unit in ((86_400, "day"), (3_600, "hour"), (60, "minute"))
        if seconds >= size
    )
    count = int(seconds // size)
    return f"{count} {unit}{'s' if count != 1 else ''} ago"
