"""First-run figures of the desktop app: ``python bench/bench_first_run.py [--json]``.

Why: three things a new user meets in the first minutes are measured, not guessed:

* **window size** — the main window's size on a fresh home, on screens of 1280x800, 800x600 and
  1024x640 (each in its own Xvfb server, so Qt sees a real screen of that size), with its
  minimum size and whether it fits the screen's available area;
* **theme switch** — the time from choosing dark (or light) until the window has repainted, with
  every page built and a 24-message conversation with code blocks on the Chat page (the median
  and the slowest of 6 switches);
* **wheel without focus** — how many input widgets (spin boxes, combo boxes, sliders) on every
  page and in the settings, download and publish dialogs change their value when the mouse wheel
  turns over them while they do not have the keyboard focus.

Needs ``xvfb-run`` (apt: xvfb). Everything happens in a temporary home folder that is deleted at
the end. The timings share the machine with whatever else runs: compare figures from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCREENS = ((1280, 800), (800, 600), (1024, 640))
THEME_SWITCHES = 6
CONVERSATION_TURNS = 12
CODE_REPLY = (
    "Here is one way:\n\n```python\ndef reverse(text: str) -> str:\n    return text[::-1]\n```\n\n"
    "It slices the string **backwards**; `reverse('abc')` gives `'cba'`."
)


def _pump(seconds: float = 0.2) -> None:
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.01)


def _open_window():
    from app.engine.settings import app_dirs
    from app.ui.main_window import MainWindow

    window = MainWindow(app_dirs())
    window.show()
    _pump(0.5)
    return window


def measure_window(width: int, height: int) -> dict[str, object]:
    """In this process (under an Xvfb screen of ``width`` x ``height``): the first-run size."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    window = _open_window()
    available = app.primaryScreen().availableGeometry()
    frame = window.frameGeometry()
    minimum = window.minimumSizeHint().expandedTo(window.minimumSize())
    figures = {
        "screen": f"{width}x{height}",
        "available": f"{available.width()}x{available.height()}",
        "window": f"{frame.width()}x{frame.height()}",
        "minimum": f"{minimum.width()}x{minimum.height()}",
        "fits": available.contains(frame),
    }
    window.shutdown()
    window.close()
    return figures


def _seed_conversation() -> None:
    from app.engine.chat.conversation import ChatSettings
    from app.engine.chat.history import HISTORY_FILE_NAME, HistoryStore
    from app.engine.settings import app_dirs

    dirs = app_dirs()
    dirs.data.mkdir(parents=True, exist_ok=True)
    store = HistoryStore(dirs.data / HISTORY_FILE_NAME)
    conversation = store.create_conversation("Reversing strings", ChatSettings())
    for turn in range(CONVERSATION_TURNS):
        store.add_user_message(conversation, f"Question {turn}: how do I reverse a string?")
        reply = store.start_reply(conversation, "demo")
        store.save_partial(reply.id, CODE_REPLY, None)
    store.close()


def measure_theme_switch() -> dict[str, float]:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    _seed_conversation()
    window = _open_window()
    for key in window.page_widgets:
        window.show_page(key)
        _pump(0.1)
    window.show_page("chat")
    _pump(1.0)
    seconds = []
    for number in range(THEME_SWITCHES):
        started = time.perf_counter()
        window.set_theme("dark" if number % 2 == 0 else "light")
        window.repaint()  # what the user waits for: the window drawn in the new look
        app.processEvents()
        seconds.append(time.perf_counter() - started)
    window.shutdown()
    window.close()
    return {"median_s": statistics.median(seconds), "max_s": max(seconds)}


def wheel_reactive(widgets: list) -> list[str]:
    """The widgets among ``widgets`` whose value a wheel turn changes while they lack focus."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QAbstractSlider, QAbstractSpinBox, QApplication, QComboBox

    def value(widget: object) -> object:
        if isinstance(widget, QAbstractSpinBox):
            return widget.text()
        if isinstance(widget, QComboBox):
            return widget.currentIndex()
        return widget.value()  # type: ignore[attr-defined]

    found = []
    for widget in widgets:
        if not isinstance(widget, QAbstractSpinBox | QComboBox | QAbstractSlider):
            continue
        if type(widget).__name__ == "QScrollBar" or not widget.isEnabled():
            continue
        if isinstance(widget, QComboBox) and widget.count() < 2:
            continue
        widget.clearFocus()
        before = value(widget)
        changed = False
        for delta in (120, -120, -120):
            centre = QPointF(widget.rect().center())
            event = QWheelEvent(
                centre,
                QPointF(widget.mapToGlobal(QPoint(int(centre.x()), int(centre.y())))),
                QPoint(0, 0),
                QPoint(0, delta),
                Qt.MouseButton.NoButton,
                Qt.KeyboardModifier.NoModifier,
                Qt.ScrollPhase.NoScrollPhase,
                False,
            )
            QApplication.sendEvent(widget, event)
            changed = changed or value(widget) != before
        if changed:
            found.append(f"{type(widget).__name__} {widget.objectName() or widget.toolTip()[:40]}")
    return found


def measure_wheel() -> dict[str, object]:
    from PySide6.QtWidgets import QApplication, QWidget

    QApplication.instance() or QApplication(sys.argv)
    window = _open_window()
    reactive: dict[str, list[str]] = {}
    for key, page in window.page_widgets.items():
        window.show_page(key)
        _pump(0.3)
        reactive[key] = wheel_reactive(page.findChildren(QWidget))
    for name, open_dialog in (
        ("settings", window.open_settings),
        ("download", window.open_download_wizard),
        ("publish", window.publish_sidecar),
    ):
        dialog = open_dialog()
        _pump(0.3)
        reactive[name] = wheel_reactive(dialog.findChildren(QWidget))
        dialog.close()
    window.shutdown()
    window.close()
    return {"count": sum(len(found) for found in reactive.values()), "widgets": reactive}


def _child(args: argparse.Namespace) -> int:
    if args.child == "window":
        width, height = (int(part) for part in args.screen.split("x"))
        result: object = measure_window(width, height)
    elif args.child == "theme":
        result = measure_theme_switch()
    else:
        result = measure_wheel()
    print(json.dumps(result))
    return 0


def _run_child(kind: str, screen: tuple[int, int] = (1600, 1000)) -> object:
    home = Path(tempfile.mkdtemp(prefix="mtp-studio-first-run-"))
    try:
        env = {**os.environ, "MTP_STUDIO_HOME": str(home / "app"), "HF_HOME": str(home / "hf")}
        env.pop("QT_QPA_PLATFORM", None)
        width, height = screen
        command = [
            "xvfb-run",
            "-a",
            "-s",
            f"-screen 0 {width}x{height}x24",
            sys.executable,
            __file__,
            "--child",
            kind,
            "--screen",
            f"{width}x{height}",
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", choices=("window", "theme", "wheel"), help=argparse.SUPPRESS)
    parser.add_argument("--screen", default="1600x1000", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args)
    if shutil.which("xvfb-run") is None:
        print("bench_first_run needs xvfb-run (apt-get install xvfb)", file=sys.stderr)
        return 1
    figures = {
        "windows": [_run_child("window", screen) for screen in SCREENS],
        "theme_switch": _run_child("theme"),
        "wheel_without_focus": _run_child("wheel"),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    for window in figures["windows"]:
        print(
            f"screen {window['screen']} (available {window['available']}): window "
            f"{window['window']}, minimum {window['minimum']}, fits: {window['fits']}"
        )
    theme = figures["theme_switch"]
    print(f"theme switch: median {theme['median_s']:.3f} s, slowest {theme['max_s']:.3f} s")
    wheel = figures["wheel_without_focus"]
    print(f"widgets that change on the wheel without focus: {wheel['count']}")
    for page, found in wheel["widgets"].items():
        for name in found:
            print(f"  {page}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
