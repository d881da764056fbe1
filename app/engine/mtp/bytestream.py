"""Cutting a stream of arbitrary chunks into exact-size pieces, copying only across chunk edges.

A source streams a run in chunks of its choosing (file reads, HTTP body pieces); decoders need
exactly the bytes of their next piece. Pieces that fall inside one chunk are zero-copy views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from app.engine.errors import ExtractError


class ByteStream:
    """Hands out the bytes of ``chunks`` in the sizes asked for, and counts what arrived."""

    def __init__(
        self, chunks: Iterator[bytes], where: str, on_chunk: Callable[[int], None] | None = None
    ) -> None:
        self._chunks = chunks
        self._where = where
        self._on_chunk = on_chunk
        self._current = memoryview(b"")

    def take(self, count: int) -> memoryview:
        """Exactly the next ``count`` bytes."""
        if count <= len(self._current):
            piece = self._current[:count]
            self._current = self._current[count:]
            return piece
        buffer = bytearray(count)
        filled = len(self._current)
        buffer[:filled] = self._current
        while filled < count:
            chunk = self._next_chunk(count - filled)
            used = min(len(chunk), count - filled)
            buffer[filled : filled + used] = chunk[:used]
            self._current = chunk[used:]
            filled += used
        return memoryview(buffer)

    def skip(self, count: int) -> None:
        """Drop the next ``count`` bytes (a bridged gap between tensors)."""
        while count > len(self._current):
            count -= len(self._current)
            self._current = self._next_chunk(count)
        self._current = self._current[count:]

    def finish(self) -> None:
        """Check that the stream held exactly the bytes taken, and let the source clean up.

        Running the source's iterator to its end lets it release what it holds (a file, an HTTP
        response) now rather than at garbage collection.
        """
        leftover = len(self._current) + sum(len(chunk) for chunk in self._chunks)
        if leftover:
            raise ExtractError(
                f"{self._where}: the source returned {leftover} bytes more than asked for; "
                "the source is faulty"
            )

    def close(self) -> None:
        """Stop the source's iterator early (after an error), releasing what it holds."""
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()

    def _next_chunk(self, wanted: int) -> memoryview:
        try:
            chunk = next(self._chunks)
        except StopIteration:
            raise ExtractError(
                f"{self._where}: the source ended {wanted} bytes early; the file is truncated — "
                "re-download it"
            ) from None
        if self._on_chunk is not None:
            self._on_chunk(len(chunk))
        return memoryview(chunk)
