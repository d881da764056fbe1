"""Help → About names every native part's version; a Linux desktop missing a library Qt needs
gets the package to install instead of Qt's plugin abort."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from PySide6.QtCore import qVersion

from app.ui.main_window import MainWindow
from app.ui.qt_libraries import (
    check_desktop_libraries,
    missing_libraries,
    missing_libraries_message,
    uses_xcb,
)

ROOT = Path(__file__).resolve().parents[2]


def test_about_shows_the_versions_of_qt_llama_cpp_and_mlx(main_window: MainWindow, qtbot) -> None:
    main_window._about()
    text = main_window.about_box.text()
    assert metadata.version("llama-cpp-python") in text
    assert metadata.version("mlx") in text
    assert metadata.version("mlx-lm") in text
    assert qVersion() in text
    assert "MTP Studio 0." in text
    main_window.about_box.close()


def test_a_missing_xcb_cursor_library_names_the_packages_to_install() -> None:
    missing = missing_libraries(can_load=lambda soname: soname != "libxcb-cursor.so.0")
    assert [library.soname for library in missing] == ["libxcb-cursor.so.0"]
    message = missing_libraries_message(missing)
    assert "sudo apt install libxcb-cursor0" in message
    assert "sudo dnf install xcb-util-cursor" in message
    assert "could not load the Qt platform plugin" not in message


def test_the_check_runs_only_where_qt_will_use_xcb() -> None:
    assert uses_xcb({"DISPLAY": ":0"}, platform="linux")
    assert uses_xcb({"QT_QPA_PLATFORM": "xcb"}, platform="linux")
    assert not uses_xcb({"QT_QPA_PLATFORM": "offscreen"}, platform="linux")
    assert not uses_xcb(
        {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"}, platform="linux"
    )
    assert not uses_xcb({}, platform="darwin")
    assert check_desktop_libraries({"QT_QPA_PLATFORM": "offscreen"}) is None


def test_the_app_names_the_missing_packages_instead_of_qts_abort(tmp_path) -> None:
    """End to end on this machine, when it lacks one of the libraries (Qt's own abort is then
    "Could not load the Qt platform plugin" with nothing to install named)."""
    missing = missing_libraries()
    if not missing:
        pytest.skip("this machine has every library Qt's xcb plugin needs: nothing to report")
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "xcb",
        "MTP_STUDIO_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(ROOT),
    }
    started = subprocess.run(
        [sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 1
    assert started.stderr.strip() == missing_libraries_message(missing)
    assert "could not load the Qt platform plugin" not in started.stderr.lower()
