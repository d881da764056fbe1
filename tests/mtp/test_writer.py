"""The streaming writer: a valid safetensors file, its hash, and nothing left behind on failure."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
import pytest
import safetensors
from safetensors import safe_open

from app.engine.mtp.writer import OutputTensor, SafetensorsStreamWriter

TENSORS = [OutputTensor("b", "F32", (3,)), OutputTensor("a", "BF16", (2, 2))]


def test_streamed_pieces_make_a_file_safetensors_reads(tmp_path: Path) -> None:
    out = tmp_path / "x.safetensors"
    with SafetensorsStreamWriter(out, TENSORS, {"format": "pt", "note": "hi"}) as writer:
        writer.write(np.array([1.0, 2.0], dtype="<f4"))
        writer.write(memoryview(np.array([3.0], dtype="<f4").tobytes()))
        writer.write(np.array([0x3F80, 0x4000, 0x4040, 0x4080], dtype="<u2"))
        written = writer.commit()

    data = out.read_bytes()
    assert written.size == len(data)
    assert written.sha256 == hashlib.sha256(data).hexdigest()
    tensors = dict(safetensors.deserialize(data))
    assert np.frombuffer(tensors["b"]["data"], "<f4").tolist() == [1.0, 2.0, 3.0]
    assert tensors["a"]["dtype"] == "BF16" and tensors["a"]["shape"] == [2, 2]
    with safe_open(str(out), framework="np") as reader:
        assert reader.metadata() == {"format": "pt", "note": "hi"}
    assert (int.from_bytes(data[:8], "little")) % 8 == 0
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]


def test_an_error_inside_the_block_removes_the_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "x.safetensors"
    out.write_bytes(b"previous good file")
    with pytest.raises(KeyError), SafetensorsStreamWriter(out, TENSORS, {}) as writer:
        writer.write(np.zeros(3, dtype="<f4"))
        raise KeyError("failure while producing data")
    assert out.read_bytes() == b"previous good file"
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]


def test_too_few_bytes_is_never_published(tmp_path: Path) -> None:
    out = tmp_path / "x.safetensors"
    with (
        pytest.raises(RuntimeError, match="header declares"),
        SafetensorsStreamWriter(out, TENSORS, {}) as writer,
    ):
        writer.write(np.zeros(3, dtype="<f4"))
        writer.commit()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_abort_ends_even_when_an_interrupt_left_a_queue_lock_held(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM raised inside ``Queue.put`` can leave the queue's lock held (an extraction
    under load then hung for ever instead of exiting 143): aborting must not need that queue."""
    out = tmp_path / "x.safetensors"
    out.write_bytes(b"previous good file")
    writer = SafetensorsStreamWriter(out, TENSORS, {})
    writer._queue.mutex.acquire()  # what the interrupted put left behind
    started = time.monotonic()
    writer.abort()
    assert time.monotonic() - started < 10
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]
    assert out.read_bytes() == b"previous good file"
