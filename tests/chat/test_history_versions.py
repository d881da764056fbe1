"""Versions and branches in the chat history, and the upgrade of a previous release's history.

What a user relies on: Regenerate keeps the earlier reply as version 1, an edited message keeps
the original and what followed it, the open thread is what a reply is conditioned on and what is
exported, and a history written by the previous release opens with every message in place —
even when the upgrade is killed half-way (it runs in one transaction).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.engine.chat.conversation import ChatSettings, reply_request, title_from
from app.engine.chat.history import HistoryStore
from app.engine.chat.history_schema import SCHEMA_VERSION
from tests.chat.history_v1 import message_text, write_version_1

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> HistoryStore:
    opened = HistoryStore(tmp_path / "chat.sqlite3")
    yield opened
    opened.close()


def _texts(store: HistoryStore, conversation: int) -> list[str]:
    return [message.content for message in store.conversation(conversation).messages]


def test_regenerate_keeps_the_earlier_reply_as_a_version(store: HistoryStore) -> None:
    conversation = store.create_conversation("t", ChatSettings())
    question = store.add_user_message(conversation, "Name a colour")
    first = store.start_reply(conversation, "m")
    store.save_partial(first.id, "Red", None)
    store.answer_again(question.id)
    assert _texts(store, conversation) == ["Name a colour"]  # the next reply's context
    second = store.start_reply(conversation, "m")
    store.save_partial(second.id, "Blue", None)

    thread = store.conversation(conversation).messages
    assert [m.content for m in thread] == ["Name a colour", "Blue"]
    assert thread[1].versions == (first.id, second.id) and thread[1].version == 2
    store.choose_version(first.id)
    assert _texts(store, conversation) == ["Name a colour", "Red"]
    assert store.conversation(conversation).messages[1].version == 1


def test_an_edit_branches_and_keeps_what_followed_the_original(store: HistoryStore) -> None:
    conversation = store.create_conversation("t", ChatSettings())
    question = store.add_user_message(conversation, "Say hi")
    reply = store.start_reply(conversation, "m")
    store.save_partial(reply.id, "Hi", None)
    store.add_user_message(conversation, "Again")

    edited = store.branch(question.id, "Say hello")
    assert _texts(store, conversation) == ["Say hello"]
    context = reply_request(ChatSettings(), store.conversation(conversation).messages).messages
    assert [m.content for m in context] == ["Say hello"]  # the branch alone is the context
    assert store.conversation(conversation).messages[0].versions == (question.id, edited.id)

    store.choose_version(question.id)  # back to the original: it ends where the user left it
    assert _texts(store, conversation) == ["Say hi", "Hi", "Again"]
    assert [c.message_count for c in store.conversations()] == [4]  # every version is kept


def test_a_previous_release_history_opens_with_every_message_in_order(tmp_path: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    write_version_1(database, conversations=3, messages=6)
    store = HistoryStore(database)
    try:
        for conversation in (1, 2, 3):
            opened = store.conversation(conversation)
            assert [m.content for m in opened.messages] == [
                message_text(conversation, i) for i in range(6)
            ]
            assert opened.settings.temperature == 0.2
            assert opened.messages[1].stats is not None
            assert opened.messages[1].stats.acceptance_by_depth == (0.75, 0.5)
            assert all(m.versions == (m.id,) for m in opened.messages)
        # the upgraded history takes new messages at the end of each thread
        store.add_user_message(2, "and one more")
        assert _texts(store, 2)[-1] == "and one more" and len(_texts(store, 2)) == 7
    finally:
        store.close()
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.slow
def test_an_upgrade_killed_half_way_leaves_the_history_whole(tmp_path: Path) -> None:
    """SIGKILL during the upgrade of a large history (it takes seconds): the file is still
    the previous release's, whole, and the next start upgrades it."""
    database = tmp_path / "chat.sqlite3"
    write_version_1(database, conversations=600, messages=200)
    upgrade = subprocess.Popen(
        [sys.executable, "-m", "tests.chat.history_v1", str(database)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upgrade.stdout is not None and upgrade.stdout.readline().strip() == "opening"
    time.sleep(0.3)
    upgrade.send_signal(signal.SIGKILL)
    upgrade.wait()
    assert upgrade.returncode == -signal.SIGKILL, "the upgrade ended before it was killed"
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # untouched

    store = HistoryStore(database)
    try:
        for conversation in (1, 300, 600):
            assert _texts(store, conversation) == [
                message_text(conversation, i) for i in range(200)
            ]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("first_message", "title"),
    [
        (
            "Write a Python function that reverses a string.",
            "Python function that reverses a string",
        ),
        (
            "Hi! Can you explain how MTP drafting works in llama.cpp?",
            "How MTP drafting works in llama.cpp",
        ),
        ("Give me a list of prime numbers below 100", "List of prime numbers below 100"),
        ("Tell me about the Eiffel tower", "The Eiffel tower"),
        ("How do I compute fibonacci numbers?", "How do I compute fibonacci numbers"),
        ("   ", "New conversation"),
    ],
)
def test_a_title_names_the_subject_in_a_few_words(first_message: str, title: str) -> None:
    assert title_from(first_message) == title
