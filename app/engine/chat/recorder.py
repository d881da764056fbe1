"""Writes a reply into the history while it streams, so a crash loses at most a moment of text.

The recorder runs on the thread that reads the runtime's stream (never the GUI thread): every
chunk updates the text in memory, and the database row is rewritten at most every
``interval_seconds`` (default 0.5 s) — far below the one-second loss budget, and few enough
writes that a long reply costs a handful of small WAL transactions. The final text, stop reason
and statistics are written when the reply ends, however it ends.
"""

from __future__ import annotations

import time

from app.engine.chat.history import HistoryStore
from app.engine.runtime.core.request import GenerationResult, TokenChunk
from app.engine.runtime.core.stats import DecodeStats

SAVE_INTERVAL_SECONDS = 0.5


class ReplyRecorder:
    """Persists one streaming assistant message (``message_id``) as its chunks arrive."""

    def __init__(
        self,
        store: HistoryStore,
        message_id: int,
        interval_seconds: float = SAVE_INTERVAL_SECONDS,
    ) -> None:
        self._store = store
        self._message_id = message_id
        self._interval = interval_seconds
        self._parts: list[str] = []
        self._stats: DecodeStats | None = None
        self._saved_at = time.monotonic()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def add(self, chunk: TokenChunk) -> None:
        self._parts.append(chunk.text)
        self._stats = chunk.stats
        now = time.monotonic()
        if now - self._saved_at >= self._interval:
            self._store.save_partial(self._message_id, self.text, self._stats)
            self._saved_at = now

    def finish(self, result: GenerationResult) -> None:
        self._store.finish_reply(self._message_id, result)

    def fail(self, error: str) -> None:
        """The reply ended with ``error``: keep what was written so far, and the error."""
        self._store.fail_reply(self._message_id, self.text, error, self._stats)
