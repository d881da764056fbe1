"""The model bar's backend indicator: which accelerators llama.cpp can use on this machine.

Asking llama.cpp loads its native library, which can take seconds and, when broken, crash; so it
runs in a subprocess off the GUI thread, once per app run: every chat window after the first
shows the answer already known.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.engine.chat.accelerator import AcceleratorReport, probe_in_subprocess
from app.ui.background import run_in_background
from app.ui.chat.widgets.model_bar import ModelBar

log = logging.getLogger(__name__)

PROBE_FAILED_TEXT = "the llama.cpp library could not be queried"
_report: AcceleratorReport | None = None


def show_backend(bar: ModelBar, is_closed: Callable[[], bool]) -> None:
    """Show the accelerators on ``bar``: at once when known, else once the probe answers
    (unless the window was closed by then)."""
    if _report is not None:
        bar.set_accelerator(_report)
        return

    def probed(report: AcceleratorReport) -> None:
        global _report
        _report = report
        if not is_closed():
            bar.set_accelerator(report)

    def failed(exc: BaseException) -> None:
        log.error("the backend probe failed", exc_info=(type(exc), exc, exc.__traceback__))
        if not is_closed():
            bar.set_accelerator(None, PROBE_FAILED_TEXT)

    run_in_background(probe_in_subprocess, probed, failed)
