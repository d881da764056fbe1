"""Images in token lists (``backends/image_cells.py``): an image's cells say which picture and
which cell they are, positions are counted the way an M-RoPE model advances them, and no cut or
checkpoint falls inside a picture."""

from __future__ import annotations

from app.engine.runtime.backends.image_cells import (
    image_at,
    image_cells,
    image_runs,
    outside_image,
    position_at,
    text_boundaries,
)
from app.engine.runtime.backends.prefix_cache import common_prefix_length, resume_point

CAT = "ab" * 32
DOG = "cd" * 32


def prompt() -> list[int]:
    """5 text tokens, a 4×3 picture (12 cells, 4 positions), 3 text tokens, a 2×2 (4, 2), 2."""
    return [1, 2, 3, 4, 5, *image_cells(CAT, 12, 4), 6, 7, 8, *image_cells(DOG, 4, 2), 9, 10]


def test_cells_name_their_picture_and_place() -> None:
    tokens = prompt()
    assert all(token < 0 for token in tokens[5:17])
    runs = list(image_runs(tokens))
    assert [(run.start, run.n_cells, run.n_positions) for run in runs] == [(5, 12, 4), (20, 4, 2)]
    assert image_at(tokens, 9) == runs[0] and image_at(tokens, 4) is None
    assert image_cells(CAT, 12, 4) != image_cells(DOG, 12, 4)
    assert image_cells(CAT, 12, 4) != image_cells(CAT, 16, 4)[:12]


def test_positions_advance_by_the_pictures_positions_not_cells() -> None:
    tokens = prompt()
    assert position_at(tokens, 5) == 5  # where the first picture starts
    assert position_at(tokens, 17) == 9  # after it: 5 + 4
    assert position_at(tokens, 20) == 12
    assert position_at(tokens, len(tokens)) == 16  # 26 cells, 16 positions


def test_no_cut_or_checkpoint_inside_a_picture() -> None:
    tokens = prompt()
    assert outside_image(tokens, 9) == 5 and outside_image(tokens, 17) == 17
    assert text_boundaries(tokens, [3, 5, 8, 17, 22, 24]) == [3, 5, 17, 24]
    other = [*tokens[:5], *image_cells(DOG, 12, 4), *tokens[17:]]
    assert common_prefix_length(tokens, other) == 5  # another picture differs at its first cell
    edited = [*tokens[:10], 99]
    # an attention-only trunk may cut anywhere, but never inside the picture
    assert resume_point(tokens, edited, rewindable=True, checkpoints=()) == 5
