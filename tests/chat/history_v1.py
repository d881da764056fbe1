"""A chat history as the previous release (schema version 1) wrote it, for the upgrade tests.

The tables are version 1's exactly (a list of messages per conversation, no versions); they are
written here with plain sqlite3 so the tests do not depend on the app's own writer.
``python -m tests.chat.history_v1 DB``: opens DB with the current app (which upgrades it), for
the test that kills an upgrade half-way.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

VERSION_1_TABLES = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    settings TEXT NOT NULL
);
CREATE TABLE messages (
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
    session TEXT NOT NULL DEFAULT ''
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE opened_models (path TEXT PRIMARY KEY, opened_at REAL NOT NULL);
CREATE TABLE preferences (name TEXT PRIMARY KEY, value TEXT NOT NULL);
PRAGMA user_version=1;
"""


def message_text(conversation: int, index: int) -> str:
    return f"message {index} of conversation {conversation}"


def write_version_1(path: Path, conversations: int, messages: int) -> None:
    """``conversations`` conversations of ``messages`` messages each, alternating user and
    assistant, the replies with stored statistics as version 1 kept them."""
    db = sqlite3.connect(path)
    db.executescript(VERSION_1_TABLES)
    db.executemany(
        "INSERT INTO conversations (title, created_at, updated_at, settings) VALUES (?, ?, ?, ?)",
        ((f"conversation {c}", c, c, '{"temperature": 0.2}') for c in range(1, conversations + 1)),
    )
    db.executemany(
        "INSERT INTO messages (conversation_id, role, content, state, created_at, model, stats) "
        "VALUES (?, ?, ?, 'complete', ?, ?, ?)",
        (
            (
                c,
                "user" if i % 2 == 0 else "assistant",
                message_text(c, i),
                c,
                "" if i % 2 == 0 else "demo-mtp.gguf",
                None if i % 2 == 0 else STATS_V1,
            )
            for c in range(1, conversations + 1)
            for i in range(messages)
        ),
    )
    db.commit()
    db.close()


STATS_V1 = (
    '{"mode": "lc", "depth": 2, "prompt_tokens": 20, "generated_tokens": 40, "cycles": 20, '
    '"drafted_by_depth": [20, 20], "accepted_by_depth": [15, 10], "prefill_seconds": 0.01, '
    '"ttft_seconds": 0.02, "elapsed_seconds": 0.5, "draft_seconds": 0.1, "draft_steps": 40, '
    '"verify_seconds": 0.3, "verify_calls": 20}'
)


if __name__ == "__main__":
    from app.engine.chat.history import HistoryStore

    print("opening", flush=True)
    HistoryStore(Path(sys.argv[1])).close()
    print("upgraded", flush=True)
