"""Chat responsiveness: the longest GUI-thread stall while the main window starts, while its
Chat page opens and a model loads, while 500 tokens stream, and while a long reply with many code
blocks streams fast.
``python bench/bench_chat_stall.py [--model PATH | --tiny] [--tokens 500]``.

A precise 2 ms timer runs on the GUI thread of the real main window (the chat is its page);
every gap between two of its ticks longer than the interval is time the event loop could not run
(a stall the user would feel as a frozen window). The model loads in the runtime's worker process
and replies stream from it exactly as in the app, rendered as Markdown with their live statistics.
Target: the longest stall ≤ 50 ms.

With no --model the bundled demo model answers; it ends its turns on its own, so the streaming
phase sends "Continue." until --tokens tokens have streamed. ``--tiny`` uses the random test model
of tests/runtime, which seldom ends a turn (one or two long replies). Runs offscreen
unless a display is available; uses a throw-away MTP_STUDIO_HOME, so the user's chat history is
never touched.

The last phase measures rendering alone: a fixed ~14 kB reply with ``CODE_BLOCKS`` fenced Python
blocks is streamed into a reply of the same window from a 1 ms timer, ``CHUNK_CHARS`` characters
a tick (about as fast as a small model on a GPU writes), then finished; it prints the stalls and
how long the final render of the whole reply took.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_MAX_STALL_MS = 50.0
TICK_MS = 2
CODE_BLOCKS = 20
CHUNK_CHARS = 12
CODE_SECTION = """### Step {index}

This step reads the file and keeps what the next step needs, line by line, without loading it
all at once; *edge cases* are `empty files` and files without a final newline.

```python
def step_{index}(path: str, encoding: str = "utf-8") -> dict[str, int]:
    \"\"\"Count lines, words and characters of ``path`` (step {index}).\"\"\"
    counts = {{"lines": 0, "words": 0, "chars": 0}}
    with open(path, encoding=encoding) as file:
        for line in file:
            counts["lines"] += 1
            counts["words"] += len(line.split())
            counts["chars"] += len(line)
    counts["average_line"] = counts["chars"] // max(counts["lines"], 1)  # 0 for an empty file
    return counts
```

"""
PROMPT = (
    "Write a long Python module with many small documented functions for working with text "
    "files: counting lines, words and characters, finding the longest line, and so on."
)


@dataclass(frozen=True)
class StallFigures:
    phase: str
    seconds: float
    ticks: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    over_target: int

    def line(self) -> str:
        verdict = "OK" if self.max_ms <= TARGET_MAX_STALL_MS else "OVER TARGET"
        return (
            f"{self.phase:<16} {self.seconds:7.2f} s  {self.ticks:6d} ticks  stall p50 "
            f"{self.p50_ms:6.1f} ms  p99 {self.p99_ms:6.1f} ms  max {self.max_ms:6.1f} ms  "
            f"(>{TARGET_MAX_STALL_MS:.0f} ms: {self.over_target})  {verdict}"
        )


class Heartbeat:
    """Records the gaps between ticks of a precise GUI-thread timer."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0
        self.gaps: list[float] = []

    def start(self) -> None:
        self.gaps = []
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self, phase: str, started: float) -> StallFigures:
        self._timer.stop()
        stalls = sorted(max(gap - TICK_MS / 1000, 0.0) * 1000 for gap in self.gaps) or [0.0]
        return StallFigures(
            phase=phase,
            seconds=time.perf_counter() - started,
            ticks=len(self.gaps),
            p50_ms=stalls[len(stalls) // 2],
            p99_ms=stalls[min(int(len(stalls) * 0.99), len(stalls) - 1)],
            max_ms=stalls[-1],
            over_target=sum(1 for stall in stalls if stall > TARGET_MAX_STALL_MS),
        )

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self._last)
        self._last = now


def _wait(app: object, condition: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the chat window")
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.001)


def _stream_code_reply(app: object, window: object) -> tuple[float, float]:
    """Stream the canned code-heavy reply into the window's transcript; return its seconds and
    the final render's milliseconds."""
    from PySide6.QtCore import QTimer

    from app.engine.chat.conversation import ASSISTANT
    from app.engine.runtime.core.request import GenerationResult
    from app.engine.runtime.core.stats import StatsRecorder

    text = "".join(CODE_SECTION.format(index=index) for index in range(CODE_BLOCKS))
    recorder = StatsRecorder(mode="lc", depth=0)
    widget = window.transcript.add(ASSISTANT, "canned reply")  # type: ignore[attr-defined]
    widget.begin_stream(0)
    position = 0

    def feed() -> None:
        nonlocal position
        chunk = text[position : position + CHUNK_CHARS]
        position += len(chunk)
        recorder.generated_tokens += 3
        widget.append(chunk, recorder.snapshot())

    timer = QTimer()
    timer.setInterval(1)
    timer.timeout.connect(feed)
    started = time.perf_counter()
    timer.start()
    _wait(app, lambda: position >= len(text), 300)
    timer.stop()
    seconds = time.perf_counter() - started
    result = GenerationResult(text, (), 0, "stop", recorder.snapshot(), 0)
    render_started = time.perf_counter()
    widget.finish(result)
    return seconds, (time.perf_counter() - render_started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--model", type=Path, help="a .gguf model (default: the bundled demo)")
    choice.add_argument(
        "--tiny", action="store_true", help="the random test model (long replies, rarely a stop)"
    )
    parser.add_argument("--tokens", type=int, default=500, help="reply length (default 500)")
    args = parser.parse_args()

    os.environ["MTP_STUDIO_HOME"] = tempfile.mkdtemp(prefix="mtp-studio-bench-")
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtWidgets import QApplication

    from app.engine.runtime.core.demo_model import demo_model_path
    from app.engine.settings import app_dirs
    from app.ui.main_window import MainWindow

    if args.tiny:
        from tests.runtime.tiny_model import write_tiny_qwen35

        model = write_tiny_qwen35(Path(tempfile.mkdtemp()) / "tiny-mtp.gguf", perturbation=0.15)
    else:
        model = args.model if args.model is not None else demo_model_path()
    app = QApplication.instance() or QApplication(sys.argv)
    heartbeat = Heartbeat()
    started = time.perf_counter()
    heartbeat.start()
    main_window = MainWindow(app_dirs())
    main_window.resize(1360, 860)
    main_window.show()
    _wait(app, lambda: not main_window.library.scanning, 60)
    _wait(app, lambda: main_window.chat_window is not None, 60)  # the Chat page, built at idle
    startup = heartbeat.stop("window start", started)

    started = time.perf_counter()
    heartbeat.start()
    window = main_window.open_chat()  # the click on Chat: it looks for models and loads one
    _wait(app, lambda: "Looking" not in window.model_bar.state.text(), 60)
    window.open_model(model)
    _wait(app, lambda: window.model_bar.state.text() == f"Ready: {model.name}", 300)
    _wait(app, lambda: "checking" not in window.model_bar.backend.text(), 120)
    load = heartbeat.stop("chat page + model load", started)

    panel = window.settings_panel
    panel.max_tokens.setValue(args.tokens)
    panel.seed.setValue(1)
    streamed, replies = 0, []
    started = time.perf_counter()
    heartbeat.start()
    while streamed < args.tokens:
        if not window.replies.send(PROMPT if not replies else "Continue."):
            raise SystemExit(window.banner.text())
        _wait(app, lambda: not window.streaming, 600)
        widget = window.transcript.messages[-1]
        replies.append(widget.figures.text())
        stats = window.store.conversation(window.conversations.current_id).messages[-1].stats
        streamed += stats.generated_tokens if stats is not None else args.tokens
        panel.max_tokens.setValue(max(args.tokens - streamed, 1))
    reply = heartbeat.stop(f"{streamed} tokens", started)

    started = time.perf_counter()
    heartbeat.start()
    code_seconds, final_render_ms = _stream_code_reply(app, window)
    code = heartbeat.stop(f"{CODE_BLOCKS} code blocks", started)

    print(f"model: {model} · platform: {app.platformName()} · {len(replies)} reply(ies)")
    for figures in replies:
        for line in figures.splitlines():
            print(f"  {line}")
    print(f"target: longest GUI-thread stall ≤ {TARGET_MAX_STALL_MS:.0f} ms (tick {TICK_MS} ms)")
    for phase in (startup, load, reply, code):
        print(phase.line())
    print(
        f"code-heavy reply: {code_seconds:.2f} s to stream, final render of the whole reply "
        f"{final_render_ms:.1f} ms"
    )
    main_window.close()
    _wait(app, lambda: window.shut_down, 60)
    return 0 if max(load.max_ms, reply.max_ms, code.max_ms) <= TARGET_MAX_STALL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
