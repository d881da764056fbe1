"""How the suite shares out among pytest-xdist workers (``-n auto --dist loadgroup``).

A test file runs on one worker, so the servers and models its module fixtures start are started
once: each test without an ``xdist_group`` mark is put in its file's group here, before xdist reads
the marks (xdist's own hook runs last). A test that must share a build with another file's tests
names their common group with ``@pytest.mark.xdist_group(...)``; e.g. the portable llama.cpp
build (:data:`PORTABLE_BUILD`), which the bundle builds too: its first build (hours, on 2 cores)
happens once. pytest 9.2 with pytest-xdist 3.8 ignores every group (pytest-dev/pytest-xdist#1386),
so pyproject.toml keeps pytest below 9.2 and tests/test_workers.py checks that groups hold.

What every worker must not share is kept per test already: the app's and Hugging Face's folders
(tests/store/isolation.py), the local hub (one per worker, on its own port) and ports
(tests/ports.py). The builds cached per machine are built under a file lock
(tests/llama_server.py) or in one group (:data:`PORTABLE_BUILD`).
"""

from __future__ import annotations

import pytest

PORTABLE_BUILD = "portable-llama-cpp"
"""The group of the tests that build or run the portable llama.cpp (packaging/build_plan.sh's
``ensure_wheel`` with ``PORTABLE_FLAGS``, and packaging/build.sh, which writes ``dist/``)."""


QT = "qt"
"""The group of every test that makes widgets in the test process: they run on one worker, in
the order a serial run gives them. Qt keeps one application per process, and what one test leaves
in it (a style, a font cache, an object awaiting deletion) is met by the next; the serial order is
the one the suite has run green in many times. With the groups ignored (above), the Qt files were
spread over both workers and one worker once died by SIGSEGV rasterising the window's SVG icon."""
_QT_FIXTURES = {"qtbot", "qapp", "main_window", "open_window", "restored_look"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = QT if _uses_qt(item) else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def _uses_qt(item: pytest.Item) -> bool:
    if _QT_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    module = getattr(item, "module", None)
    return (
        any(
            getattr(value, "__module__", "").startswith(("PySide6", "app.ui"))
            for value in vars(module).values()
        )
        if module is not None
        else False
    )
