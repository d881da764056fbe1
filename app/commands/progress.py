"""Job events rendered as terminal lines, shared by every CLI command that runs a job.

Stages and log lines (names from the Hub among them, made inert by
:func:`~app.engine.terminal.printable`) are printed as they come; progress shows percent, bytes,
speed and time left, redrawn in place on a terminal and every 10% otherwise (so logs stay short).
The final
``ResultEvent`` is kept for the command, which knows how to summarise its own result.
"""

from __future__ import annotations

from typing import Any, TextIO

from app.engine.credentials import mask_credentials
from app.engine.jobs import JobEvent, LogEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.terminal import printable
from app.engine.transfer_rate import TransferRate, format_duration
from app.engine.units import format_bytes, format_rate


class ProgressPrinter:
    """Renders job events as lines: stages, logs, and progress with speed and time left."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._rate = TransferRate()
        self._live = stream.isatty()
        self._last_percent = -1
        self.result: dict[str, Any] = {}

    def __call__(self, event: JobEvent) -> None:
        if isinstance(event, ProgressEvent):
            self._progress(event)
            return
        if isinstance(event, ResultEvent):
            self.result = event.summary
            return
        if self._live and self._last_percent >= 0:
            self._stream.write("\n")
        self._last_percent = -1
        if isinstance(event, StageEvent):
            detail = f" {event.detail}" if event.detail else ""
            self._stream.write(printable(mask_credentials(f"{event.stage}:{detail}")) + "\n")
        elif isinstance(event, LogEvent):
            self._stream.write(f"  {printable(mask_credentials(event.message))}\n")
        self._stream.flush()

    def _progress(self, event: ProgressEvent) -> None:
        reading = self._rate.update(event.done, event.total)
        percent = int(100 * event.done / event.total) if event.total else 0
        speed = format_rate(reading.bytes_per_second)
        left = format_duration(reading.seconds_left)
        line = (
            f"{event.stage}: {percent}% ({format_bytes(event.done)} / {format_bytes(event.total)})"
            f" {speed}, {left} left"
        )
        if self._live:
            self._stream.write(f"\r{line}\033[K")
        elif percent // 10 != self._last_percent // 10:
            self._stream.write(line + "\n")
        self._last_percent = percent
        self._stream.flush()
