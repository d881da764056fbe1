"""A pause switch for a running download: the job holds still between chunks until resumed.

Separate from cancellation (which ends the job): a paused download keeps its partial files and
its place in the monitor; while paused it holds no connection open.
"""

from __future__ import annotations

import threading

from app.engine.jobs import CancelToken


class PauseToken:
    """Thread-safe; the front end calls pause/resume, the job calls :meth:`wait_while_paused`."""

    def __init__(self) -> None:
        self._running = threading.Event()
        self._running.set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def wait_while_paused(self, cancel: CancelToken, poll_seconds: float = 0.1) -> None:
        """Return once resumed or cancelled (the caller checks which)."""
        while not self._running.wait(poll_seconds):
            if cancel.cancelled:
                return
