"""Images in a token list: each image stands as one negative pseudo-id per KV cell it fills.

A prompt with images is a list of chunks (text tokens, images) once a projector has split it
(docs/vision.md#images-in-generation-mtp-drafts-kept). The rest of the runtime —
prompt length checks, the kept sessions of prefix reuse, the longest-common-prefix rule — works
on token lists, so an image is written into the list as ``n_cells`` pseudo-ids, each negative (no
real token id is) and carrying the image's pixel hash, its cell count, its position count and the
cell's index in the image. Two prompts then share a prefix exactly up to the first differing text
token or the first image whose pixels or size differ, and a kept session knows where its images
are without a table beside it.

Cells and positions differ once images are in a context: on an M-RoPE model (Qwen-VL, Qwen3.5)
an image of w × h tokens fills w·h cells but advances the position by max(w, h). A list of cells
gives a position with :func:`position_at`; a cut is never made inside an image
(:func:`outside_image`), since llama.cpp can only keep or drop an image whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_FIELD = 1 << 24
"""Room for a cell index, a cell count and a position count (an image has at most a few
thousand tokens; projectors cap it far below 16 million)."""


@dataclass(frozen=True)
class ImageRun:
    """One image in a token list: cells ``start`` .. ``start + n_cells − 1``."""

    start: int
    n_cells: int
    n_positions: int
    key: int

    @property
    def end(self) -> int:
        return self.start + self.n_cells


def image_cells(content_hash: str, n_cells: int, n_positions: int) -> list[int]:
    """The pseudo-ids of an image of ``n_cells`` cells and ``n_positions`` positions."""
    if not 0 < n_cells < _FIELD or not 0 < n_positions < _FIELD:
        raise ValueError(f"an image of {n_cells} cells and {n_positions} positions")
    key = int(content_hash[:16], 16)
    base = ((key * _FIELD + n_positions) * _FIELD + n_cells) * _FIELD
    return [-(1 + base + index) for index in range(n_cells)]


def is_image_cell(token: int) -> bool:
    return token < 0


def _fields(token: int) -> tuple[int, int, int, int]:
    """(key, n_positions, n_cells, index) of an image cell."""
    value = -token - 1
    value, index = divmod(value, _FIELD)
    value, n_cells = divmod(value, _FIELD)
    key, n_positions = divmod(value, _FIELD)
    return key, n_positions, n_cells, index


def image_at(tokens: Sequence[int], cell: int) -> ImageRun | None:
    """The image whose cell ``cell`` is, or None when it is text."""
    token = tokens[cell]
    if not is_image_cell(token):
        return None
    key, n_positions, n_cells, index = _fields(token)
    return ImageRun(cell - index, n_cells, n_positions, key)


def image_runs(tokens: Sequence[int], start: int = 0, end: int | None = None) -> Iterator[ImageRun]:
    """The images that begin in ``tokens[start:end]``, in order."""
    end = len(tokens) if end is None else end
    cell = start
    while cell < end:
        if is_image_cell(tokens[cell]):
            run = image_at(tokens, cell)
            assert run is not None
            if run.start == cell:
                yield run
            cell = run.end
        else:
            cell += 1


def has_images(tokens: Sequence[int]) -> bool:
    return any(is_image_cell(token) for token in tokens)


def position_at(tokens: Sequence[int], length: int) -> int:
    """The position of cell ``length`` (where text after ``tokens[:length]`` goes): the cells
    less what the images before it do not advance."""
    if length <= 0:
        return 0
    return length - sum(run.n_cells - run.n_positions for run in image_runs(tokens, 0, length))


def outside_image(tokens: Sequence[int], length: int) -> int:
    """``length`` moved back to the start of the image it would cut (unchanged otherwise)."""
    if 0 < length < len(tokens):
        run = image_at(tokens, length)
        if run is not None:
            return run.start
    return length


def text_boundaries(tokens: Sequence[int], marks: Sequence[int]) -> list[int]:
    """The ``marks`` (lengths) that do not cut an image: a recurrent checkpoint is taken at
    text positions only."""
    return [mark for mark in marks if outside_image(tokens, mark) == mark]
