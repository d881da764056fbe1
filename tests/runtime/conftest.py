"""Tiny random qwen35 GGUFs built once per session, and one in-process llama.cpp backend.

Each test has its own app folders (the shared ``home`` fixture): what an adaptive depth saves
stays in the test.

The in-process backend keeps the exactness tests fast (a model load per test would dominate);
the worker-process behaviour has its own tests that go through :class:`RuntimeClient`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.core.backend import LoadSettings
from tests.runtime.tiny_model import write_tiny_qwen35


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {
        "mtp": write_tiny_qwen35(root / "tiny-mtp.gguf", perturbation=0.15),
        "no_mtp": write_tiny_qwen35(root / "tiny-no-mtp.gguf", mtp_blocks=0),
        "two_mtp_blocks": write_tiny_qwen35(root / "tiny-two-blocks.gguf", mtp_blocks=2),
    }


@pytest.fixture(scope="session")
def backend(tiny_models: dict[str, Path]) -> Iterator[LlamaCppBackend]:
    loaded = LlamaCppBackend(tiny_models["mtp"], LoadSettings(threads=1, context_length=1024))
    yield loaded
    loaded.close()
