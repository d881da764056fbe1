"""Fuzzing a checkpoint's config.json and index reader: an ExtractError or a sound detection.

The safetensors header's JSON is fuzzed in test_header_fuzz.py; this target aims at the other
two JSON files every extraction and publish reads first (issue 23: a lying config made
``extract`` grow past 17 GB): random JSON values, declared layer counts from 0 to 2^64, deep
nesting and long numbers, written into a real synthetic checkpoint's config.json or index. The
reader must answer with :class:`ExtractError` naming the file, or a detection whose layers exist.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.errors import ExtractError
from app.engine.mtp import LocalFolderSource
from app.engine.mtp.detect import detect_mtp
from tests.hardening.test_header_fuzz import FUZZ
from tests.mtp.checkpoints import INDEX_FILE, build_deepseek_v3

counts = st.one_of(st.integers(-3, 8), st.integers(0, 2**64), st.floats(), st.text(max_size=4))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def checkpoint() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-config-") as folder:
        yield build_deepseek_v3(Path(folder) / "ckpt").folder


def _detect(folder: Path) -> None:
    try:
        detection = detect_mtp(LocalFolderSource(folder), allow_partial=True)
    except ExtractError as exc:
        assert folder.name in str(exc) or "config.json" in str(exc) or INDEX_FILE in str(exc)
        return
    assert detection.tensors


@pytest.mark.slow
@FUZZ
@given(
    nextn=counts,
    trunk=counts,
    mtp=counts,
    extra=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)
def test_declared_counts_in_config(checkpoint: Path, nextn, trunk, mtp, extra: dict) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "ckpt"
        shutil.copytree(checkpoint, folder, symlinks=True)
        config = {**extra, "num_nextn_predict_layers": nextn, "num_hidden_layers": trunk}
        config["text_config"] = {"mtp_num_hidden_layers": mtp}
        (folder / "config.json").write_text(json.dumps(config))
        _detect(folder)


@FUZZ
@given(
    text=st.one_of(
        st.builds(json.dumps, json_values),
        st.builds(lambda d: "[" * d + "]" * d, st.integers(1, 100_000)),
        st.builds(lambda n: '{"n": ' + "7" * n + "}", st.integers(1, 60_000)),
        st.text(max_size=64),
    ),
    which=st.sampled_from(["config.json", INDEX_FILE]),
)
@pytest.mark.slow
def test_random_json_as_config_or_index(checkpoint: Path, text: str, which: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "ckpt"
        shutil.copytree(checkpoint, folder, symlinks=True)
        (folder / which).write_text(text)
        _detect(folder)
