"""Short calls that may touch the network (sign-in, planning a download, Hub status checks) run
off the GUI thread; their result comes back as a callback on the GUI thread.

Jobs (long, recorded, cancellable) go through :class:`~app.ui.jobs.runner.JobRunner` instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar

from PySide6.QtCore import QObject, Signal


class BackgroundCall(QObject):
    """One call in a worker thread; ``done`` or ``failed`` is emitted on the GUI thread."""

    done = Signal(object)
    failed = Signal(object)

    _alive: ClassVar[set[BackgroundCall]] = set()  # keeps running calls from being collected

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__()
        self._work = work

    def start(self) -> BackgroundCall:
        """Run the call; connect ``done``/``failed`` first, so they are delivered before the
        call lets go of itself (slots run in connection order)."""
        self.done.connect(self._forget)
        self.failed.connect(self._forget)
        BackgroundCall._alive.add(self)
        threading.Thread(target=self._run, daemon=True, name="background-call").start()
        return self

    def _run(self) -> None:
        try:
            result = self._work()
        except Exception as exc:
            self.failed.emit(exc)
            return
        self.done.emit(result)

    def _forget(self, _outcome: object) -> None:
        BackgroundCall._alive.discard(self)


def run_in_background(
    work: Callable[[], Any],
    on_done: Callable[[Any], None],
    on_failed: Callable[[BaseException], None],
) -> BackgroundCall:
    """Run ``work()`` in a thread; ``on_done(result)`` or ``on_failed(exc)`` runs on the GUI one."""
    call = BackgroundCall(work)
    call.done.connect(on_done)
    call.failed.connect(on_failed)
    return call.start()
