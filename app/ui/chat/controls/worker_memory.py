"""The model bar's "RAM in use": the inference worker's resident memory, read every few seconds.

The worker is a process of its own (llama.cpp or MLX with the weights, caches and kept states),
so what a loaded model costs the machine is that process's resident set, read with psutil (the
same figure on Linux, macOS and Windows). Reading it takes microseconds; it is read on a timer
only while a worker runs, and a worker that is gone reads as none.
"""

from __future__ import annotations

from collections.abc import Callable

import psutil
from PySide6.QtCore import QObject, QTimer

READ_EVERY_MS = 2000


def resident_bytes(pid: int | None) -> int | None:
    """The resident memory of process ``pid`` (None: no process, or it is gone)."""
    if pid is None:
        return None
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


class WorkerMemory(QObject):
    """Calls ``show(bytes or None)`` with the memory of the worker ``pid()`` names."""

    def __init__(
        self,
        pid: Callable[[], int | None],
        show: Callable[[int | None], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._pid = pid
        self._show = show
        self._timer = QTimer(self)
        self._timer.setInterval(READ_EVERY_MS)
        self._timer.timeout.connect(self.read)

    def follow(self, running: bool) -> None:
        """Read now and every few seconds while a worker runs; stop when none does."""
        if running:
            self.read()
            self._timer.start()
        else:
            self._timer.stop()
            self._show(None)

    def read(self) -> None:
        self._show(resident_bytes(self._pid()))
