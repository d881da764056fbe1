"""Chat tests: isolated folders, a tiny MTP GGUF, and the bundled demo model when it exists.

Behaviour tests that need a long reply (stop mid-reply, a worker killed mid-reply) use the tiny
random qwen35 model at temperature 0: greedy, it does not end those replies on its own within
``LONG_REPLY`` tokens (sampled, it sometimes does), so a stop always lands mid-reply. Tests
about what a user reads (a streamed reply, its statistics, no special tokens) run on the bundled
demo model when ``resources/models/demo-mtp.gguf`` is present, else on the tiny model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.runtime.core.demo_model import DEMO_MODEL_FILENAME, MODELS_DIR
from tests.runtime.tiny_model import write_tiny_qwen35

DEMO_GGUF = MODELS_DIR / DEMO_MODEL_FILENAME


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen35(
        tmp_path_factory.mktemp("chat-models") / "tiny-mtp.gguf", perturbation=0.15
    )


@pytest.fixture(scope="session")
def tiny_gguf_without_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("chat-models-plain")
    return write_tiny_qwen35(folder / "tiny-plain.gguf", mtp_blocks=0)


@pytest.fixture(scope="session")
def reading_model(tiny_gguf: Path) -> Path:
    """The bundled demo model when it has landed, else the tiny model."""
    return DEMO_GGUF if DEMO_GGUF.is_file() else tiny_gguf


@pytest.fixture
def chat(qtbot, tmp_path: Path):
    from tests.chat.windows import ChatDriver

    return ChatDriver(qtbot, tmp_path / "no-demo-model")
