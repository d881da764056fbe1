"""Fuzzing the safetensors and GGUF header readers: a clear area error or a sound header, always.

Hypothesis builds headers that lie — lengths past the end or of 2^64, offsets out of range or
overlapping, shapes whose product overflows any integer type, dtypes that do not exist, JSON
nested thousands deep or with numbers of thousands of digits, GGUF counts and string lengths of
2^64, arrays nested without end — plus plain random bytes. The readers must answer each with
their area's error (:class:`ExtractError`, :class:`RuntimeBackendError`) or a header whose every
tensor lies inside the file; never another exception, a hang (each example has a deadline), or a
read sized by a claimed length instead of the file's real size.

Bounded: ``max_examples`` per test below (the run counts in the report come from
``--hypothesis-show-statistics``), a per-example deadline, and no example database on disk.
"""

from __future__ import annotations

import itertools
import json
import struct
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.errors import ExtractError, RuntimeBackendError
from app.engine.gguf_header import GgufHeader, read_gguf_header
from app.engine.mtp import LocalFolderSource
from app.engine.mtp.header import DTYPE_BITS, ShardHeader, read_shard_header

SHARD = "model.safetensors"
FUZZ = settings(
    max_examples=300,
    deadline=timedelta(seconds=3),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class SizedReadSource(LocalFolderSource):
    """A real folder source that remembers the largest read it was asked for."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.largest_request = 0

    def read_bytes(self, path: str, start: int = 0, length: int | None = None) -> bytes:
        asked = self.file_sizes()[path] - start if length is None else length
        self.largest_request = max(self.largest_request, asked)
        return super().read_bytes(path, start, length)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        yield Path(folder)


def read_safetensors(folder: Path, data: bytes) -> tuple[ShardHeader | None, int]:
    (folder / SHARD).write_bytes(data)
    source = SizedReadSource(folder)
    try:
        header = read_shard_header(source, SHARD)
    except ExtractError as exc:
        assert SHARD in str(exc)
        header = None
    return header, source.largest_request


def assert_sound(header: ShardHeader, file_size: int) -> None:
    spans = sorted((t.start, t.end) for t in header.tensors.values() if t.nbytes)
    for tensor in header.tensors.values():
        assert header.header_bytes <= tensor.start <= tensor.end <= file_size
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start


dims = st.one_of(st.integers(0, 8), st.integers(0, 2**70), st.integers(-3, -1), st.just(2**64 - 1))
entries = st.fixed_dictionaries(
    {
        "dtype": st.one_of(st.sampled_from(sorted(DTYPE_BITS)), st.text(max_size=6)),
        "shape": st.one_of(st.lists(dims, max_size=6), st.integers(), st.none()),
        "data_offsets": st.one_of(
            st.lists(st.integers(-4, 2**66), min_size=2, max_size=2),
            st.lists(st.integers(0, 64), min_size=2, max_size=2),
            st.lists(st.integers(0, 64), max_size=3),
            st.text(max_size=3),
        ),
    }
)
headers = st.dictionaries(st.text(max_size=8), entries, max_size=5)


@FUZZ
@given(
    header=headers,
    data_size=st.integers(0, 256),
    length_lie=st.one_of(st.none(), st.integers(0, 2**64 - 1), st.integers(-16, 16)),
)
@pytest.mark.slow
def test_structured_safetensors_headers(
    scratch: Path, header: dict, data_size: int, length_lie: int | None
) -> None:
    text = json.dumps(header).encode()
    declared = len(text) if length_lie is None else max(0, len(text) + length_lie)
    if length_lie is not None and length_lie > 16:
        declared = length_lie
    data = declared.to_bytes(8, "little") + text + bytes(data_size)
    parsed, largest = read_safetensors(scratch, data)
    assert largest <= len(data)
    if parsed is not None:
        assert_sound(parsed, len(data))


@FUZZ
@given(text=st.sampled_from(["[", "{", '{"a":']), depth=st.integers(1, 200_000))
def test_deeply_nested_json_headers(scratch: Path, text: str, depth: int) -> None:
    body = (text * depth).encode()
    data = len(body).to_bytes(8, "little") + body
    parsed, largest = read_safetensors(scratch, data)
    assert parsed is None and largest <= len(data)


@FUZZ
@given(digits=st.integers(1, 60_000), where=st.sampled_from(["shape", "data_offsets"]))
def test_numbers_with_thousands_of_digits(scratch: Path, digits: int, where: str) -> None:
    huge = "9" * digits
    entry = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    raw = json.dumps({"t": entry}).replace(
        '"shape": [1]' if where == "shape" else '"data_offsets": [0, 4]',
        f'"shape": [{huge}]' if where == "shape" else f'"data_offsets": [0, {huge}]',
    )
    body = raw.encode()
    data = len(body).to_bytes(8, "little") + body + bytes(4)
    parsed, largest = read_safetensors(scratch, data)
    assert largest <= len(data)
    assert parsed is None or digits <= 1


@FUZZ
@given(data=st.binary(max_size=512))
def test_random_bytes_as_safetensors(scratch: Path, data: bytes) -> None:
    parsed, largest = read_safetensors(scratch, data)
    assert largest <= len(data)
    if parsed is not None:
        assert_sound(parsed, len(data))


# -- GGUF -----------------------------------------------------------------------------------

U64 = st.one_of(st.integers(0, 8), st.integers(0, 2**64 - 1))


def gguf_string(text: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(text) if length is None else length) + text


@st.composite
def gguf_values(draw: st.DrawFn, depth: int = 0) -> bytes:
    """One typed metadata value: scalars, strings (lengths may lie), arrays (counts may lie)."""
    kind = draw(st.sampled_from([0, 4, 6, 7, 8, 9, 10, 12, 13, 99] if depth < 3 else [4, 8]))
    if kind in (13, 99):  # unknown types
        return struct.pack("<I", kind) + draw(st.binary(max_size=8))
    if kind == 8:
        text = draw(st.binary(max_size=12))
        length = draw(st.one_of(st.none(), U64))
        return struct.pack("<I", 8) + gguf_string(text, length)
    if kind == 9:
        item = draw(st.sampled_from([4, 8, 9]))
        count = draw(U64)
        items = b"".join(draw(st.lists(st.binary(max_size=8), max_size=4)))
        return struct.pack("<IIQ", 9, item, count) + items
    size = {0: 1, 4: 4, 6: 4, 7: 1, 10: 8, 12: 8}[kind]
    return struct.pack("<I", kind) + draw(st.binary(min_size=size, max_size=size))


@st.composite
def gguf_files(draw: st.DrawFn) -> bytes:
    version = draw(st.sampled_from([1, 2, 3, 2**31]))
    tensor_count = draw(U64)
    pairs = draw(st.lists(st.tuples(st.binary(max_size=10), gguf_values()), max_size=4))
    key_count = draw(st.one_of(st.just(len(pairs)), U64))
    out = b"GGUF" + struct.pack("<IQQ", version, tensor_count, key_count)
    for key, value in pairs:
        out += gguf_string(key) + value
    for _ in range(draw(st.integers(0, 3))):
        n_dims = draw(st.one_of(st.integers(0, 4), st.integers(0, 2**32 - 1)))
        dims = draw(st.lists(U64, max_size=4))
        kind = draw(
            st.one_of(st.sampled_from([int(t) for t in GGMLQuantizationType]), st.integers(0, 999))
        )
        out += gguf_string(draw(st.binary(max_size=6)))
        out += struct.pack("<I", n_dims) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", kind, draw(U64))
    return out + draw(st.binary(max_size=64))


def read_gguf(folder: Path, data: bytes) -> GgufHeader | None:
    path = folder / "model.gguf"
    path.write_bytes(data)
    try:
        return read_gguf_header(path)
    except RuntimeBackendError as exc:
        assert str(path) in str(exc)
        return None


@FUZZ
@given(data=gguf_files())
def test_structured_gguf_headers(scratch: Path, data: bytes) -> None:
    header = read_gguf(scratch, data)
    if header is not None:
        assert header.required_bytes is None or header.required_bytes >= 0


@FUZZ
@given(depth=st.integers(1, 50_000))
def test_gguf_arrays_nested_without_end(scratch: Path, depth: int) -> None:
    nested = struct.pack("<IQ", 9, 1) * depth  # array of one array of one array …
    data = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + gguf_string(b"k")
        + struct.pack("<I", 9)
        + nested
        + struct.pack("<I", 4)
        + b"\0" * 4
    )
    assert read_gguf(scratch, data) is None or depth < 8


@FUZZ
@given(count=st.integers(2**40, 2**64 - 1), item=st.sampled_from([0, 4, 10, 8]))
def test_gguf_arrays_claiming_more_items_than_the_file_holds(
    scratch: Path, count: int, item: int
) -> None:
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string(b"k")
    data += struct.pack("<IIQ", 9, item, count) + bytes(64)
    assert read_gguf(scratch, data) is None


@FUZZ
@given(n_dims=st.integers(64, 4096), dim=st.integers(2**32, 2**64 - 1))
def test_gguf_tensor_shapes_whose_product_overflows(scratch: Path, n_dims: int, dim: int) -> None:
    data = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gguf_string(b"t")
    data += struct.pack("<I", n_dims) + struct.pack("<Q", dim) * n_dims
    data += struct.pack("<IQ", int(GGMLQuantizationType.F32), 0)
    header = read_gguf(scratch, data)
    assert header is None or header.required_bytes is None or header.required_bytes > len(data)


@FUZZ
@given(data=st.binary(max_size=512), magic=st.booleans())
def test_random_bytes_as_gguf(scratch: Path, data: bytes, magic: bool) -> None:
    read_gguf(scratch, (b"GGUF" if magic else b"") + data)
