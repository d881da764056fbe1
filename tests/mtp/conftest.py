"""Synthetic checkpoints built once per test session (tests only read them)."""

from __future__ import annotations

import pytest

from tests.mtp.checkpoints import BUILDERS, SyntheticCheckpoint


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SyntheticCheckpoint]:
    root = tmp_path_factory.mktemp("checkpoints")
    return {name: build(root / name) for name, build in BUILDERS.items()}
