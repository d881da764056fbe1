"""Short background calls deliver their outcome on the GUI thread, to any kind of callback."""

import gc
import threading

from app.ui.background import run_in_background


def test_a_lambda_callback_receives_the_result_on_the_gui_thread(qtbot) -> None:
    received: list[tuple[object, bool]] = []
    run_in_background(
        lambda: 6 * 7,
        lambda value: received.append(
            (value, threading.current_thread() is threading.main_thread())
        ),
        lambda exc: received.append((exc, False)),
    )
    gc.collect()
    qtbot.waitUntil(lambda: bool(received), timeout=5000)
    assert received == [(42, True)]


def test_a_failure_reaches_the_failure_callback(qtbot) -> None:
    failures: list[BaseException] = []

    def broken() -> None:
        raise OSError("disk on fire")

    run_in_background(broken, lambda _value: None, lambda exc: failures.append(exc))
    gc.collect()
    qtbot.waitUntil(lambda: bool(failures), timeout=5000)
    assert isinstance(failures[0], OSError) and "disk on fire" in str(failures[0])
