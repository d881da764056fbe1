"""The chat history in SQLite: conversations, their messages, and the models the user opened.

Why it looks the way it does:
- A reply is written *while* it streams (see :mod:`app.engine.chat.recorder`), so a crash of the
  app loses at most the last fraction of a second of text, never the conversation. WAL mode keeps
  those frequent small writes cheap and lets the GUI read while the streaming thread writes; one
  connection guarded by a lock serves both threads.
- Each open store holds a lock file named after its session. On open, a reply still marked
  ``streaming`` whose session lock can be taken was being written by a process that died: it is
  marked ``interrupted`` (its text is kept). Another app instance's live reply is left alone.
- A conversation is a tree (:mod:`app.engine.chat.history_schema`): Regenerate adds a version
  beside the reply it replaces, Edit starts a branch beside the message it changes, and the
  conversation remembers which thread is open. :meth:`HistoryStore.conversation` returns that
  thread, each message with its versions, so everything that reads a conversation (the reply's
  context, export, the transcript) reads one coherent thread.
- A user message's pictures are kept with it, each picture's bytes once however many messages
  show it (:mod:`app.engine.chat.history_schema`, version 3), and dropped with the last
  conversation that shows them; an edited message keeps its pictures unless given others.
- The schema carries a version (``PRAGMA user_version``); an older history is upgraded in place in
  one transaction, and a database from a newer app is refused with a message instead of being
  half-understood, so an update never loses history.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import EllipsisType
from typing import Any

from filelock import FileLock, Timeout

from app.engine.chat.conversation import (
    ChatSettings,
    Conversation,
    ConversationSummary,
    MessageState,
    StoredMessage,
    stats_from_json,
    stats_to_json,
)
from app.engine.chat.history_schema import HistoryError, prepare
from app.engine.chat.threads import thread_of
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.chat_format.prompting import PlacedImage
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.core.stats import DecodeStats
from app.engine.store.sqlite_file import connect_private, is_locked, locked_message

log = logging.getLogger(__name__)

HISTORY_FILE_NAME = "chat.sqlite3"
FAILED_REASON = "failed"
INTERRUPTED_REASON = "interrupted"

_MESSAGE_COLUMNS = (
    "id, conversation_id, role, content, state, created_at, model, finish_reason, stats, seed, "
    "note, error, parent_id"
)
_NEWEST_BELOW = """
WITH RECURSIVE below(id) AS (
    SELECT ? UNION ALL SELECT m.id FROM messages AS m JOIN below ON m.parent_id = below.id
)
SELECT MAX(id) FROM below
"""


class HistoryStore:
    """The chat history of this user; thread-safe (the GUI reads, the stream thread writes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.session = uuid.uuid4().hex
        self._sessions_dir = path.parent / "chat-sessions"
        try:
            self._sessions_dir.mkdir(parents=True, exist_ok=True)
            # not thread-local: the window may close the store from its runtime thread
            self._session_lock = FileLock(
                self._sessions_dir / f"{self.session}.lock", thread_local=False
            )
            self._session_lock.acquire()
        except OSError as exc:
            raise HistoryError(
                f"{path}: cannot create the chat history ({exc}); check the data folder's "
                "permissions and free space"
            ) from None
        try:
            self._db = self._open(path)
        except BaseException:
            self._session_lock.release()
            (self._sessions_dir / f"{self.session}.lock").unlink(missing_ok=True)
            raise
        self._lock = threading.Lock()
        self.interrupted_on_open = self._mark_dead_sessions_interrupted()

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        db = None
        try:
            db = connect_private(path)
            prepare(db, path)
        except HistoryError:
            if db is not None:
                db.close()
            raise
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            if is_locked(exc):
                raise HistoryError(locked_message(path, "chat history")) from None
            raise HistoryError(
                f"{path}: cannot open the chat history ({exc}); move the file away to start a "
                "new history (the old file is not changed)"
            ) from None
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()
        self._session_lock.release()
        (self._sessions_dir / f"{self.session}.lock").unlink(missing_ok=True)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
                self._db.commit()
            except sqlite3.DatabaseError as exc:
                self._db.rollback()
                if is_locked(exc):
                    raise HistoryError(locked_message(self.path, "chat history")) from None
                raise HistoryError(
                    f"{self.path}: cannot write the chat history ({exc}); check free disk space"
                ) from None

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:
                if is_locked(exc):
                    raise HistoryError(locked_message(self.path, "chat history")) from None
                raise

    # -- conversations ------------------------------------------------------------------------

    def create_conversation(self, title: str, settings: ChatSettings) -> int:
        now = time.time()
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO conversations (title, created_at, updated_at, settings) "
                "VALUES (?, ?, ?, ?)",
                (title, now, now, json.dumps(settings.to_dict())),
            )
        return int(cursor.lastrowid or 0)

    def conversations(self, search: str = "") -> list[ConversationSummary]:
        """Newest first; ``search`` matches titles and message text (any version),
        case-insensitively. The message count includes every version (counting each thread
        took ten times as long, and the list is read whenever a message is sent)."""
        sql = (
            "SELECT c.id, c.title, c.created_at, c.updated_at, "
            "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
            "FROM conversations c"
        )
        args: tuple[Any, ...] = ()
        if search.strip():
            pattern = f"%{_escape_like(search.strip())}%"
            sql += (
                " WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m "
                "WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\')"
            )
            args = (pattern, pattern)
        sql += " ORDER BY c.updated_at DESC, c.id DESC"
        return [ConversationSummary(*row) for row in self._read(sql, args)]

    def conversation(self, conversation_id: int) -> Conversation:
        """The conversation with its open thread (each message with its versions)."""
        rows = self._read(
            "SELECT id, title, created_at, updated_at, settings, current_leaf FROM conversations "
            "WHERE id = ?",
            (conversation_id,),
        )
        if not rows:
            raise HistoryError(
                f"conversation {conversation_id} is not in {self.path}; it may have been deleted "
                "in another window"
            )
        cid, title, created, updated, settings, leaf = rows[0]
        images = self._images_of(conversation_id)
        messages = [
            _message(row, images.get(row[0], ()))
            for row in self._read(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            )
        ]
        thread = thread_of(messages, leaf)
        summary = ConversationSummary(cid, title, created, updated, len(thread))
        return Conversation(summary, _settings(cid, settings), thread)

    def rename(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if not title:
            raise HistoryError("a conversation needs a title; type at least one character")
        with self._write() as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._write() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            db.execute("DELETE FROM images WHERE sha256 NOT IN (SELECT sha256 FROM message_images)")

    def save_settings(self, conversation_id: int, settings: ChatSettings) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE conversations SET settings = ? WHERE id = ?",
                (json.dumps(settings.to_dict()), conversation_id),
            )

    # -- messages -----------------------------------------------------------------------------

    def add_user_message(
        self, conversation_id: int, content: str, images: Sequence[PlacedImage] = ()
    ) -> StoredMessage:
        """The user's next message, at the end of the open thread, with ``images`` at their
        places in its text."""
        return self._insert(
            conversation_id, "user", content, MessageState.COMPLETE, model="", images=images
        )

    def start_reply(self, conversation_id: int, model: str) -> StoredMessage:
        """An empty assistant message in state ``streaming`` at the end of the open thread,
        owned by this session."""
        return self._insert(conversation_id, "assistant", "", MessageState.STREAMING, model=model)

    def save_partial(self, message_id: int, content: str, stats: DecodeStats | None) -> None:
        """The text so far of a streaming reply (ignored once the reply is finished)."""
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, stats = ? WHERE id = ? AND state = ?",
                (content, _stats_text(stats), message_id, MessageState.STREAMING.value),
            )
            self._touch(db, message_id)

    def finish_reply(self, message_id: int, result: GenerationResult) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, state = ?, finish_reason = ?, stats = ?, "
                "seed = ?, note = ? WHERE id = ?",
                (
                    result.text,
                    MessageState.COMPLETE.value,
                    result.finish_reason,
                    _stats_text(result.stats),
                    result.seed,
                    result.note or "",
                    message_id,
                ),
            )
            self._touch(db, message_id)

    def fail_reply(
        self, message_id: int, content: str, error: str, stats: DecodeStats | None
    ) -> None:
        """A reply that ended with an error: its partial text and the error are kept."""
        with self._write() as db:
            db.execute(
                "UPDATE messages SET content = ?, state = ?, finish_reason = ?, error = ?, "
                "stats = ? WHERE id = ?",
                (
                    content,
                    MessageState.FAILED.value,
                    FAILED_REASON,
                    error,
                    _stats_text(stats),
                    message_id,
                ),
            )
            self._touch(db, message_id)

    # -- versions and branches ----------------------------------------------------------------

    def answer_again(self, message_id: int) -> None:
        """Open the thread up to ``message_id`` (a user message), so the next reply is a new
        version beside the replies it already has; those are kept."""
        with self._write() as db:
            conversation = self._conversation_of(db, message_id)
            db.execute(
                "UPDATE conversations SET current_leaf = ? WHERE id = ?",
                (message_id, conversation),
            )

    def branch(
        self, message_id: int, content: str, images: Sequence[PlacedImage] | None = None
    ) -> StoredMessage:
        """An edited message: a new version of ``message_id`` with ``content``, starting a
        branch of its own; the original and everything that followed it are kept. The new
        version shows ``images``, or when None the original's pictures (none past its end)."""
        rows = self._read("SELECT parent_id FROM messages WHERE id = ?", (message_id,))
        if not rows:
            raise HistoryError(f"message {message_id} no longer exists; reload the chat")
        with self._lock:
            conversation = self._conversation_of(self._db, message_id)
        if images is None:
            original = self._images_of(conversation).get(message_id, ())
            images = [PlacedImage(min(p.offset, len(content)), p.image) for p in original]
        return self._insert(
            conversation,
            "user",
            content,
            MessageState.COMPLETE,
            model="",
            parent=rows[0][0],
            images=images,
        )

    def _images_of(self, conversation_id: int) -> dict[int, tuple[PlacedImage, ...]]:
        """The pictures of every message of a conversation, by message id, in place order."""
        return _placed_images(self._read(_IMAGES_OF_CONVERSATION, (conversation_id,)))

    def image_bytes(self) -> int:
        """Bytes of the stored pictures (each counted once)."""
        rows = self._read("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM images")
        return int(rows[0][0])

    def choose_version(self, message_id: int) -> None:
        """Open the thread through ``message_id``, down to the newest message that follows it
        (where the user last was on that branch)."""
        with self._write() as db:
            conversation = self._conversation_of(db, message_id)
            (leaf,) = db.execute(_NEWEST_BELOW, (message_id,)).fetchone()
            db.execute(
                "UPDATE conversations SET current_leaf = ? WHERE id = ?", (leaf, conversation)
            )

    def _insert(
        self,
        conversation_id: int,
        role: str,
        content: str,
        state: MessageState,
        model: str,
        parent: int | EllipsisType | None = ...,
        images: Sequence[PlacedImage] = (),
    ) -> StoredMessage:
        """Insert a message after ``parent`` (default: the end of the open thread) and make it
        the end of the open thread, in one transaction."""
        now = time.time()
        with self._write() as db:
            if parent is ...:
                parent = self._leaf(db, conversation_id)
            cursor = db.execute(
                "INSERT INTO messages (conversation_id, role, content, state, created_at, model, "
                "session, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, role, content, state.value, now, model, self.session, parent),
            )
            message_id = int(cursor.lastrowid or 0)
            _place_images(db, message_id, images)
            db.execute(
                "UPDATE conversations SET updated_at = ?, current_leaf = ? WHERE id = ?",
                (now, message_id, conversation_id),
            )
        return StoredMessage(
            message_id, conversation_id, role, content, state, now, model, images=tuple(images)
        )

    @staticmethod
    def _leaf(db: sqlite3.Connection, conversation_id: int) -> int | None:
        """The message the open thread ends with (the newest when none was recorded)."""
        leaf = db.execute(
            "SELECT m.id FROM conversations c JOIN messages m ON m.id = c.current_leaf "
            "WHERE c.id = ?",
            (conversation_id,),
        ).fetchone()
        if leaf is not None:
            return int(leaf[0])
        newest = db.execute(
            "SELECT MAX(id) FROM messages WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()[0]
        return int(newest) if newest is not None else None

    def _conversation_of(self, db: sqlite3.Connection, message_id: int) -> int:
        row = db.execute(
            "SELECT conversation_id FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise HistoryError(f"message {message_id} no longer exists; reload the chat")
        return int(row[0])

    @staticmethod
    def _touch(db: sqlite3.Connection, message_id: int) -> None:
        db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = "
            "(SELECT conversation_id FROM messages WHERE id = ?)",
            (time.time(), message_id),
        )

    # -- models and preferences ---------------------------------------------------------------

    def remember_model(self, path: Path) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO opened_models (path, opened_at) VALUES (?, ?) "
                "ON CONFLICT(path) DO UPDATE SET opened_at = excluded.opened_at",
                (str(path), time.time()),
            )

    def forget_model(self, path: Path) -> None:
        with self._write() as db:
            db.execute("DELETE FROM opened_models WHERE path = ?", (str(path),))

    def opened_models(self) -> list[Path]:
        """Models the user opened by hand, most recent first."""
        rows = self._read("SELECT path FROM opened_models ORDER BY opened_at DESC")
        return [Path(row[0]) for row in rows]

    def preference(self, name: str) -> str | None:
        rows = self._read("SELECT value FROM preferences WHERE name = ?", (name,))
        return rows[0][0] if rows else None

    def set_preference(self, name: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO preferences (name, value) VALUES (?, ?) "
                "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                (name, value),
            )

    # -- crash recovery -----------------------------------------------------------------------

    def _mark_dead_sessions_interrupted(self) -> int:
        """Mark replies left ``streaming`` by a dead process as interrupted; return how many."""
        rows = self._read(
            "SELECT DISTINCT session FROM messages WHERE state = ? AND session != ?",
            (MessageState.STREAMING.value, self.session),
        )
        count = 0
        for (session,) in rows:
            lock_path = self._sessions_dir / f"{session}.lock"
            lock = FileLock(lock_path)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue  # another live app instance is writing that reply
            try:
                with self._write() as db:
                    cursor = db.execute(
                        "UPDATE messages SET state = ?, finish_reason = ? "
                        "WHERE state = ? AND session = ?",
                        (
                            MessageState.INTERRUPTED.value,
                            INTERRUPTED_REASON,
                            MessageState.STREAMING.value,
                            session,
                        ),
                    )
                    count += cursor.rowcount
            finally:
                lock.release()
                lock_path.unlink(missing_ok=True)
        return count


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _stats_text(stats: DecodeStats | None) -> str | None:
    return json.dumps(stats_to_json(stats)) if stats is not None else None


_IMAGES_OF_CONVERSATION = (
    "SELECT mi.message_id, mi.text_offset, i.sha256, i.media_type, i.width, i.height, i.data "
    "FROM message_images mi JOIN images i ON i.sha256 = mi.sha256 "
    "JOIN messages m ON m.id = mi.message_id WHERE m.conversation_id = ? "
    "ORDER BY mi.message_id, mi.place"
)


def _placed_images(rows: list[tuple[Any, ...]]) -> dict[int, tuple[PlacedImage, ...]]:
    placed: dict[int, list[PlacedImage]] = {}
    for message_id, offset, sha256, media_type, width, height, data in rows:
        part = ImagePart(bytes(data), media_type, width, height, sha256)
        placed.setdefault(message_id, []).append(PlacedImage(offset, part))
    return {message_id: tuple(images) for message_id, images in placed.items()}


def _place_images(db: sqlite3.Connection, message_id: int, images: Sequence[PlacedImage]) -> None:
    """Store each picture's bytes once (by the file's SHA-256) and place it in the message."""
    for place, placed in enumerate(images):
        part = placed.image
        db.execute(
            "INSERT OR IGNORE INTO images (sha256, media_type, width, height, data) "
            "VALUES (?, ?, ?, ?, ?)",
            (part.sha256, part.media_type, part.width, part.height, part.data),
        )
        db.execute(
            "INSERT INTO message_images (message_id, place, text_offset, sha256) "
            "VALUES (?, ?, ?, ?)",
            (message_id, place, placed.offset, part.sha256),
        )


def _settings(conversation_id: int, stored: str) -> ChatSettings:
    """The conversation's settings; stored text that is not a JSON object (a faulty build's, a
    damaged file) gives the default settings, as the job history does with its rows."""
    try:
        raw = json.loads(stored)
    except (ValueError, TypeError, RecursionError):
        raw = None
    if not isinstance(raw, dict):
        log.warning(
            "conversation %s: its stored settings are not JSON; defaults used", conversation_id
        )
        return ChatSettings()
    return ChatSettings.from_dict(raw)


def _stats(message_id: int, stored: str | None) -> DecodeStats | None:
    if not stored:
        return None
    try:
        return stats_from_json(json.loads(stored))
    except (ValueError, TypeError, RecursionError, AttributeError):
        log.warning("message %s: its stored figures are not readable; left out", message_id)
        return None


def _message(row: tuple[Any, ...], images: tuple[PlacedImage, ...] = ()) -> StoredMessage:
    mid, cid, role, content, state, created, model, reason, stats, seed, note, error, parent = row
    return StoredMessage(
        id=mid,
        conversation_id=cid,
        role=role,
        content=content,
        state=MessageState(state),
        created_at=created,
        model=model,
        finish_reason=reason,
        stats=_stats(mid, stats),
        seed=seed,
        note=note,
        error=error,
        parent_id=parent,
        images=images,
    )
