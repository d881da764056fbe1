"""Fuzzing the graft's GGUF layout reader (``graft --base``): a GraftError or a sound layout.

Issue 23 found this reader apart from the hardened one: a string length of 2^60 was a
``MemoryError``, 2^64−1 an ``OverflowError`` and 5 000 nested arrays a ``RecursionError``. It now
reads fields with the hardened reader; these targets feed it the same lying files as the header
fuzz tests (shared strategies) plus the three files from the issue, and accept only a
:class:`GraftError` naming the file, or a layout whose every tensor lies inside the file.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.errors import GraftError
from app.engine.graft.gguf_layout import GgufLayout, read_gguf_layout
from tests.hardening.test_header_fuzz import FUZZ, gguf_files, gguf_string

HEADER = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string(b"general.name")


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-graft-") as folder:
        yield Path(folder)


def read_layout(folder: Path, data: bytes) -> GgufLayout | None:
    path = folder / "base.gguf"
    path.write_bytes(data)
    try:
        layout = read_gguf_layout(path)
    except GraftError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return None
    for tensor in layout.tensors:
        assert layout.data_start + tensor.offset + tensor.nbytes <= len(data)
    return layout


@pytest.mark.parametrize("length", [2**60, 2**64 - 1])
def test_string_lengths_from_the_issue(tmp_path: Path, length: int) -> None:
    data = HEADER + struct.pack("<I", 8) + struct.pack("<Q", length) + b"abc"
    assert read_layout(tmp_path, data) is None


def test_five_thousand_nested_arrays(tmp_path: Path) -> None:
    data = HEADER + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000 + bytes(8)
    assert read_layout(tmp_path, data) is None


@FUZZ
@given(data=gguf_files())
@pytest.mark.slow
def test_structured_gguf_files(scratch: Path, data: bytes) -> None:
    read_layout(scratch, data)


@FUZZ
@given(count=st.integers(2**20, 2**64 - 1), item=st.sampled_from([0, 4, 8, 9, 10]))
def test_arrays_claiming_more_items_than_the_file_holds(
    scratch: Path, count: int, item: int
) -> None:
    data = HEADER + struct.pack("<IIQ", 9, item, count) + bytes(64)
    assert read_layout(scratch, data) is None


@FUZZ
@given(data=st.binary(max_size=512), magic=st.booleans())
def test_random_bytes(scratch: Path, data: bytes, magic: bool) -> None:
    read_layout(scratch, (b"GGUF" if magic else b"") + data)
