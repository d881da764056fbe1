"""The chat history's tables, their versions, and the upgrade of an older history in place.

Version 2 made a conversation a tree: every message names the one it answers (``parent_id``),
so a regenerated reply is a second version beside the first and an edited message starts a
branch beside the original instead of deleting what followed it; ``current_leaf`` names the
message the open thread ends with. A version-1 history (a list per conversation) is upgraded when
it is opened: each message's parent becomes the message before it, and each conversation's
thread ends with its last message, so it reads exactly as before.

Version 3 added pictures: a user message's pictures are stored once per file content (``images``,
keyed by the file's SHA-256, so the same picture sent in many turns or conversations takes its
bytes once) and placed in the message by ``message_images``; a picture no message shows any more
is dropped with its conversation. Older histories gain the two tables.

The upgrade runs in one transaction (``BEGIN IMMEDIATE`` … ``COMMIT``, the version number
included): a crash or a power cut during it leaves the version-1 history as it was, and the next
start upgrades it again. A history from a newer app is refused with a message, never
half-understood.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.engine.errors import MtpStudioError

SCHEMA_VERSION = 3

_TABLES = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    settings TEXT NOT NULL,
    current_leaf INTEGER
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    finish_reason TEXT NOT NULL DEFAULT '',
    stats TEXT,
    seed INTEGER,
    note TEXT NOT NULL DEFAULT '',
    error TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT '',
    parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS images (
    sha256 TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS message_images (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    place INTEGER NOT NULL,
    text_offset INTEGER NOT NULL,
    sha256 TEXT NOT NULL REFERENCES images(sha256),
    PRIMARY KEY (message_id, place)
);
CREATE TABLE IF NOT EXISTS opened_models (
    path TEXT PRIMARY KEY,
    opened_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS preferences (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

_INDEXES = """
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE INDEX IF NOT EXISTS messages_by_parent ON messages(parent_id);
CREATE INDEX IF NOT EXISTS message_images_by_image ON message_images(sha256);
"""

_VERSION_1_TO_2 = (
    "ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE",
    "ALTER TABLE conversations ADD COLUMN current_leaf INTEGER",
    "UPDATE messages SET parent_id = (SELECT MAX(earlier.id) FROM messages AS earlier "
    "WHERE earlier.conversation_id = messages.conversation_id AND earlier.id < messages.id)",
    "UPDATE conversations SET current_leaf = "
    "(SELECT MAX(id) FROM messages WHERE conversation_id = conversations.id)",
)

_VERSION_2_TO_3 = tuple(
    statement
    for statement in _TABLES.strip().split(";")
    if "CREATE TABLE IF NOT EXISTS images" in statement
    or "CREATE TABLE IF NOT EXISTS message_images" in statement
)


class HistoryError(MtpStudioError):
    """The chat history database cannot be opened or written."""


def prepare(db: sqlite3.Connection, path: Path) -> None:
    """Make ``db`` a current history: new tables, or an older history upgraded in one go."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"{path}: chat history version {version} is newer than this app "
            "understands; update MTP Studio (the history is left untouched)"
        )
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    if version == SCHEMA_VERSION:
        db.executescript(_INDEXES)
        # take the write lock once: a history held by another program is named now, at open,
        # not at the first reply it could not record
        db.execute("BEGIN IMMEDIATE")
        db.commit()
        return
    db.commit()
    db.execute("BEGIN IMMEDIATE")
    try:
        if version in (1, 2):
            upgrades = (_VERSION_1_TO_2 if version == 1 else ()) + _VERSION_2_TO_3
            for statement in upgrades:
                db.execute(statement)
        else:
            _create(db)
        for statement in _INDEXES.strip().split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.commit()
    except BaseException:
        db.rollback()
        raise


def _create(db: sqlite3.Connection) -> None:
    for statement in _TABLES.strip().split(";"):
        if statement.strip():
            db.execute(statement)
