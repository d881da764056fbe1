"""A GGUF without a head but with a paired sidecar gets "Add the MTP head from <sidecar>" in the
chat window's model bar; it runs as a recorded job and the grafted copy is selected, loaded and
drafts. A sidecar of another model is refused with the reason and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.engine.mtp import LocalFolderSource, extract_mtp
from app.engine.settings import app_dirs
from app.engine.store import JobState, JobStore
from tests.chat.windows import LOAD_TIMEOUT_MS
from tests.graft.bases import DEMO_FP8, DEMO_GGUF, write_trunk_only
from tests.graft.sidecars import QWEN_HEAD_SHAPES, write_bf16_sidecar

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trunk_and_sidecar(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("headless")
    base = write_trunk_only(DEMO_GGUF, folder / "demo-trunk.gguf")
    sidecar = folder / "mtp.safetensors"
    extract_mtp(LocalFolderSource(DEMO_FP8), sidecar)
    return base, sidecar


def _click_graft(chat, window) -> QMessageBox:
    button = window.model_bar.graft_button
    chat.qtbot.waitUntil(button.isVisible, timeout=LOAD_TIMEOUT_MS)
    chat.qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(
        lambda: window.graft.confirmation is not None or window.banner.isVisible(),
        timeout=LOAD_TIMEOUT_MS,
    )
    return window.graft.confirmation


def test_adding_the_head_from_the_paired_sidecar_makes_the_gguf_draft(
    chat, trunk_and_sidecar: tuple[Path, Path], tmp_path: Path
) -> None:
    base_file, sidecar_file = trunk_and_sidecar
    folder = tmp_path / "models"
    folder.mkdir()
    base = Path(shutil.copy(base_file, folder / base_file.name))
    shutil.copy(sidecar_file, folder / "mtp.safetensors")
    window = chat.open()
    chat.load(window, base)
    described = window.model_bar.current()
    assert described.mtp_blocks == 0 and described.sidecar == folder / "mtp.safetensors"
    button = window.model_bar.graft_button
    assert button.text() == "Add the MTP head from models/mtp.safetensors…"

    confirmation = _click_graft(chat, window)
    assert confirmation is not None, window.banner.text()
    assert str(folder / "demo-trunk-mtp.gguf") in confirmation.informativeText()
    confirmation.button(QMessageBox.StandardButton.Yes).click()

    grafted = folder / "demo-trunk-mtp.gguf"
    chat.qtbot.waitUntil(
        lambda: window.model_bar.state.text() == f"Ready: {grafted.name}", timeout=LOAD_TIMEOUT_MS
    )
    assert window.model_bar.current().path == grafted
    assert window.model_bar.current().mtp_blocks == 1
    assert not window.model_bar.graft_button.isVisible()  # it has its head now
    assert base.is_file()  # the original is kept

    reply = chat.ask(window, "Write a function that reverses a string.")
    assert "MTP auto depth" in reply.figures.text()  # the grafted head drafted this reply
    conversation = window.store.conversation(window.conversations.current_id)
    stats = conversation.messages[-1].stats
    assert stats is not None and stats.drafted_by_depth[0] > 0

    store = JobStore(app_dirs().job_database)
    try:
        (record,) = [job for job in store.jobs() if job.spec.kind == "graft"]
        assert record.state == JobState.SUCCEEDED
        assert record.spec.params["out"] == str(grafted)
    finally:
        store.close()


def test_a_sidecar_of_another_model_is_refused_with_the_tensor_and_nothing_written(
    chat, trunk_and_sidecar: tuple[Path, Path], tmp_path: Path
) -> None:
    base_file, _sidecar = trunk_and_sidecar
    folder = tmp_path / "models"
    folder.mkdir()
    base = Path(shutil.copy(base_file, folder / base_file.name))
    wider = {**QWEN_HEAD_SHAPES, "mtp.layers.0.mlp.gate_proj.weight": (1024, 256)}
    write_bf16_sidecar(folder / "mtp.safetensors", wider)
    window = chat.open()
    chat.load(window, base)

    assert _click_graft(chat, window) is None
    message = window.banner.text()
    assert "does not fit demo-trunk.gguf" in message
    assert "gate" in message and "1024" in message
    assert sorted(path.name for path in folder.iterdir()) == ["demo-trunk.gguf", "mtp.safetensors"]
