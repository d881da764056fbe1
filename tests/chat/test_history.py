"""The chat history as a user relies on it: conversations survive, replies are saved while they
stream (a crash loses at most the last second), search, rename, delete, edit, and no
half-understood database from a newer app."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.chat.conversation import ChatSettings, MessageState, reply_request
from app.engine.chat.history import HistoryError, HistoryStore
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient

REPO = Path(__file__).resolve().parents[2]
LOSS_BUDGET_SECONDS = 1.0


@pytest.fixture
def store(tmp_path: Path) -> HistoryStore:
    opened = HistoryStore(tmp_path / "chat.sqlite3")
    yield opened
    opened.close()


def _writer(database: Path, model: Path | str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.chat.history_writer", str(database), str(model), mode],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_reply_and_its_statistics_survive_reopening(tmp_path: Path, tiny_gguf: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    store = HistoryStore(database)
    settings = ChatSettings(
        system_prompt="Be brief.", temperature=0.0, max_tokens=48, mtp_depth=2, seed=7
    )
    conversation_id = store.create_conversation("Greetings", settings)
    store.add_user_message(conversation_id, "Hello there")
    reply = store.start_reply(conversation_id, tiny_gguf.name)
    request = reply_request(settings, store.conversation(conversation_id).messages[:1])
    with RuntimeClient(tiny_gguf, settings=LoadSettings(threads=1, context_length=1024)) as client:
        result = client.generate(request)
    store.finish_reply(reply.id, result)
    store.close()

    reopened = HistoryStore(database)
    try:
        conversation = reopened.conversation(conversation_id)
    finally:
        reopened.close()
    assert conversation.title == "Greetings"
    assert conversation.settings == settings
    user, assistant = conversation.messages
    assert (user.role, user.content) == ("user", "Hello there")
    assert assistant.content == result.text and assistant.content
    assert assistant.state is MessageState.COMPLETE
    assert assistant.finish_reason == result.finish_reason
    assert assistant.stats == result.stats
    assert assistant.stats.depth == 2 and assistant.stats.cycles > 0
    assert assistant.model == "tiny-mtp.gguf"
    assert assistant.seed == 7


@pytest.mark.slow
def test_a_crash_mid_reply_loses_at_most_the_last_second(tmp_path: Path, tiny_gguf: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    writer = _writer(database, tiny_gguf, "crash")
    output, _ = writer.communicate(timeout=120)
    assert writer.returncode == -signal.SIGKILL
    records = [json.loads(line) for line in output.splitlines()]
    message_id = records[0]["message_id"]
    chunks = [record for record in records if "text" in record]
    killed_at = records[-1]["killed_at"]
    received = "".join(chunk["text"] for chunk in chunks)
    must_have = "".join(c["text"] for c in chunks if c["at"] <= killed_at - LOSS_BUDGET_SECONDS)

    store = HistoryStore(database)
    try:
        (conversation,) = store.conversations()
        reply = store.conversation(conversation.id).messages[-1]
        assert store.interrupted_on_open == 1
    finally:
        store.close()
    assert reply.id == message_id
    assert reply.state is MessageState.INTERRUPTED and reply.finish_reason == "interrupted"
    assert must_have, "the writer streamed for less than the loss budget"
    assert received.startswith(reply.content)
    assert len(reply.content) >= len(must_have)


def test_a_live_instance_reply_is_not_marked_interrupted(tmp_path: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    writer = _writer(database, "-", "hold")
    try:
        assert writer.stdout is not None
        message_id = json.loads(writer.stdout.readline())["message_id"]
        assert writer.stdout.readline().strip() == "READY"
        store = HistoryStore(database)
        (summary,) = store.conversations()
        reply = store.conversation(summary.id).messages[-1]
        store.close()
        assert reply.id == message_id and reply.state is MessageState.STREAMING
    finally:
        writer.kill()
        writer.wait()
    store = HistoryStore(database)
    try:
        reply = store.conversation(summary.id).messages[-1]
    finally:
        store.close()
    assert reply.state is MessageState.INTERRUPTED
    assert reply.content == "partial text of a live session"


def test_search_rename_delete_and_edit(store: HistoryStore) -> None:
    first = store.create_conversation("Fibonacci in Python", ChatSettings())
    store.add_user_message(first, "How do I compute fibonacci numbers?")
    second = store.create_conversation("Regex help", ChatSettings())
    store.add_user_message(second, "Match 100% of digits_only strings")
    assert [c.id for c in store.conversations()] == [second, first]
    assert [c.id for c in store.conversations("FIBONACCI")] == [first]
    assert [c.id for c in store.conversations("100%")] == [second]
    assert [c.id for c in store.conversations("digits_only")] == [second]
    assert store.conversations("10_%") == []

    store.rename(first, "  Fib  ")
    assert store.conversation(first).title == "Fib"
    with pytest.raises(HistoryError, match="needs a title"):
        store.rename(first, "   ")

    question = store.conversation(first).messages[0]
    reply = store.start_reply(first, "model.gguf")
    store.save_partial(reply.id, "Use a loop", None)
    store.add_user_message(first, "And recursively?")
    store.branch(question.id, "How do I compute primes?")
    (edited,) = store.conversation(first).messages
    assert edited.content == "How do I compute primes?"

    store.delete(second)
    assert [c.id for c in store.conversations()] == [first]
    with pytest.raises(HistoryError, match="deleted"):
        store.conversation(second)


def test_a_finished_reply_is_not_overwritten_by_a_late_partial_save(
    store: HistoryStore, tiny_gguf: Path
) -> None:
    conversation = store.create_conversation("late", ChatSettings())
    reply = store.start_reply(conversation, "m")
    with RuntimeClient(tiny_gguf, settings=LoadSettings(threads=1, context_length=1024)) as client:
        result = client.generate(GenerationRequest(prompt="hi", max_tokens=8))
    store.finish_reply(reply.id, result)
    store.save_partial(reply.id, "stale", None)
    stored = store.conversation(conversation).messages[-1]
    assert stored.content == result.text and stored.state is MessageState.COMPLETE


def test_a_history_from_a_newer_app_is_refused_and_left_untouched(tmp_path: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    HistoryStore(database).close()
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA user_version=99")
    before = database.read_bytes()
    with pytest.raises(HistoryError, match="newer than this app understands; update MTP Studio"):
        HistoryStore(database)
    assert database.read_bytes() == before


def test_a_damaged_history_file_is_a_readable_error(tmp_path: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    database.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryError, match=r"cannot open the chat history .* move the file away"):
        HistoryStore(database)


def test_the_history_runs_in_wal_mode(store: HistoryStore) -> None:
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
