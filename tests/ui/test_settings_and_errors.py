"""Settings and sign-in dialogs, readable errors with tracebacks only in the log, and the app
opening offline on a fresh machine."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from app.engine.errors import DownloadError
from app.engine.settings import Settings, SettingsStore, app_dirs
from app.ui.errors import show_error
from app.ui.logsetup import LOG_FILE_NAME, configure_logging
from app.ui.main_window import MainWindow
from app.ui.settings_dialog import SettingsDialog, SignInDialog
from tests.desktop_app import run_until_shown
from tests.localhub import LocalHub
from tests.localhub.fixtures import TEST_TOKEN
from tests.store.isolation import IsolatedHome

ROOT = Path(__file__).resolve().parents[2]


def test_settings_are_validated_before_they_are_saved(main_window: MainWindow, qtbot) -> None:
    assert not app_dirs().settings_file.exists(), "defaults are not written until changed"
    dialog = main_window.open_settings()
    assert isinstance(dialog, SettingsDialog)
    dialog.endpoint_edit.setText("huggingface.co")
    dialog.backend_combo.setCurrentText("llama.cpp")
    dialog.collection_check.setChecked(False)
    dialog._save()
    assert "Hub endpoint 'huggingface.co' is not a URL" in dialog.error_label.text()
    assert not app_dirs().settings_file.exists()
    assert dialog.isVisible()

    dialog.endpoint_edit.setText("http://127.0.0.1:8123")
    dialog._save()
    assert not dialog.isVisible()
    assert SettingsStore().load() == Settings(
        hub_endpoint="http://127.0.0.1:8123",
        file_in_collection=False,
        default_backend="llama.cpp",
        catalog_files=main_window.settings.catalog_files,
    )
    assert main_window.status_line.endpoint_label.text() == "Hub: http://127.0.0.1:8123"
    assert main_window.status_book.endpoint == "http://127.0.0.1:8123"


def test_sign_in_checks_the_token_and_writes_the_standard_file(
    local_hub: LocalHub, qtbot, home: IsolatedHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN")
    dialog = SignInDialog(local_hub.endpoint)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.token_edit.setText("hf_this_token_is_not_known_1234")
    dialog._check()
    qtbot.waitUntil(lambda: dialog.buttons.isEnabled(), timeout=10_000)
    assert dialog.status_label.text() == (
        f"{local_hub.endpoint} rejected the token; create a new one at "
        f"{local_hub.endpoint}/settings/tokens"
    )
    assert not home.token_file.exists()

    with qtbot.waitSignal(dialog.signed_in, timeout=10_000) as signed:
        dialog.token_edit.setText(TEST_TOKEN)
        dialog._check()
    assert signed.args == ["mtp-tester"]
    assert home.token_file.read_text() == TEST_TOKEN
    assert dialog.token_edit.text() == ""

    from app.ui.settings_dialog import token_summary

    assert token_summary() == f"Signed in with hf_…{TEST_TOKEN[-4:]} (from {home.token_file})"


def test_errors_are_readable_and_the_traceback_goes_to_the_log(qtbot, home: IsolatedHome) -> None:
    log_file = configure_logging(app_dirs().logs)
    try:
        try:
            _ = 1 / 0
        except ZeroDivisionError as exc:
            show_error(None, "Something broke", exc)
        try:
            raise DownloadError("not enough free disk space in /x; free some space")
        except DownloadError as exc:
            show_error(None, "Cannot download", exc)
        logging.getLogger("app.test").info("token in a message: %s", TEST_TOKEN)
        boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox)]
        texts = sorted(box.text() for box in boxes if box.isVisible())
        assert texts == [
            "Something unexpected went wrong (ZeroDivisionError). The details are in the log "
            "file (Help → Open logs folder); please include it when you report the problem.",
            "not enough free disk space in /x; free some space",
        ]
        for box in boxes:
            box.close()
        for handler in logging.getLogger().handlers:
            handler.flush()
        logged = log_file.read_text()
        assert "Traceback (most recent call last)" in logged
        assert "ZeroDivisionError: division by zero" in logged
        assert "not enough free disk space" not in logged, "readable errors need no traceback"
        assert TEST_TOKEN not in logged and "token in a message: hf_…" in logged
        assert log_file.name == LOG_FILE_NAME
    finally:
        for handler in list(logging.getLogger().handlers):
            if getattr(handler, "baseFilename", "") == str(log_file):
                logging.getLogger().removeHandler(handler)
                handler.close()


@pytest.mark.slow
def test_the_app_opens_offline_on_a_fresh_machine(home: IsolatedHome) -> None:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "HF_HOME": str(home.root / "fresh-hf"),
        "HF_ENDPOINT": "http://127.0.0.1:9",  # nothing listens: offline
        "PYTHONPATH": str(ROOT),
    }
    fresh = home.root / "fresh"
    err = run_until_shown([sys.executable, "-m", "app"], env, fresh, stay_up_seconds=4)
    assert "Traceback" not in err
    assert (fresh / "data" / "jobs.sqlite3").exists()
