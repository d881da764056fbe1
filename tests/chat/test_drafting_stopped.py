"""A model whose drafts are garbage on this backend: the reply and the model bar say why.

The tiny model's MTP head is scrambled on purpose (as a backend that miscomputes it would leave
it); the chat window runs it on real llama.cpp through the worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.runtime.speculative.draft_health import DRAFTING_STOPPED, JUDGED_AFTER_CYCLES
from tests.runtime.tiny_model import write_tiny_qwen35


@pytest.fixture(scope="module")
def scrambled_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scrambled-chat")
    return write_tiny_qwen35(folder / "tiny-scrambled.gguf", perturbation=0.15, scrambled_head=True)


@pytest.mark.slow
def test_the_reply_and_the_model_bar_say_drafting_stopped(chat, scrambled_gguf: Path) -> None:
    window = chat.open()
    chat.load(window, scrambled_gguf)
    window.settings_panel.temperature.setValue(0.0)  # greedy: runs to max tokens
    window.settings_panel.mtp_depth.setValue(1)
    window.settings_panel.max_tokens.setValue(JUDGED_AFTER_CYCLES + 40)
    reply = chat.ask(window, "Tell me about lines")
    notice = reply.notice.text()
    assert notice.startswith(f"{DRAFTING_STOPPED}: the MTP head's first draft was kept in ")
    backend_line = window.model_bar.backend.text()
    assert "drafting stopped: the MTP head&#x27;s first draft was kept in" in backend_line
