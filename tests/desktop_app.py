"""The desktop app started as a user starts it (``python -m app``, or the bundled executable), for
the tests that check it opens and stays up.

Readiness is what the app says, not a guess at how long starting takes: it logs
``WINDOW_SHOWN`` at its first event-loop turn with the window on screen. The test then keeps it
running a few seconds more (the Chat page is built while idle) before closing it.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from app.ui.logsetup import LOG_FILE_NAME
from app.ui.main import WINDOW_SHOWN

START_SECONDS = 120


def run_until_shown(
    command: Sequence[str], env: dict[str, str], app_home: Path, *, stay_up_seconds: float
) -> str:
    """Run the app on ``app_home`` (its ``MTP_STUDIO_HOME``) until its window has been on screen
    for ``stay_up_seconds``, close it, and return what it wrote on stderr.

    Fails if the app exits before that, or shows no window in :data:`START_SECONDS`.
    """
    log_file = app_home / "logs" / LOG_FILE_NAME
    with tempfile.TemporaryFile("w+") as stderr:  # a file: an unread pipe would fill and stall it
        process = subprocess.Popen(
            list(command),
            env={**env, "MTP_STUDIO_HOME": str(app_home)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
        try:
            _wait_until_shown(process, log_file)
            time.sleep(stay_up_seconds)
            assert process.poll() is None, "the window closed by itself"
        except AssertionError as failure:
            process.kill()
            process.wait()
            stderr.seek(0)
            raise AssertionError(f"{failure}; its stderr:\n{stderr.read()[-4000:]}") from None
        process.terminate()
        process.wait(timeout=30)
        stderr.seek(0)
        return stderr.read()


def _wait_until_shown(process: subprocess.Popen[str], log_file: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not (log_file.is_file() and WINDOW_SHOWN in log_file.read_text(errors="replace")):
        assert process.poll() is None, "the app exited before its window was shown"
        assert time.monotonic() < deadline, f"no window in {START_SECONDS} s"
        time.sleep(0.1)
