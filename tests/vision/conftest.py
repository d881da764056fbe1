"""The vision demo (trunk + projector) loaded once per session, and test pictures made here.

The model is the one the project ships (``resources/models/demo-vision/``, made by
``tools/make_vision_model.py``); the pictures are generated with Pillow, so every test knows
exactly what it sends.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Iterator

import llama_cpp
import numpy as np
import pytest
from PIL import Image

from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.backends.llama_cpp.batch import NumpyBatch
from app.engine.runtime.backends.llama_cpp.images import TEXT, ImagePrompt, VisionProjector
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL, DEMO_VISION_PROJECTOR

BATCH = 512


def picture(width: int, height: int, seed: int = 0, image_format: str = "PNG", **save) -> bytes:
    """A deterministic noisy gradient of ``width`` × ``height``, encoded as ``image_format``."""
    generator = np.random.default_rng(seed)
    x = np.linspace(0, 200, width)[None, :, None]
    y = np.linspace(0, 200, height)[:, None, None]
    base = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2)
    noise = generator.integers(0, 55, size=(height, width, 3))
    pixels = (base + noise).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format=image_format, **save)
    return buffer.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_declaring(width: int, height: int, body: bytes = b"") -> bytes:
    """A PNG whose header declares ``width`` × ``height`` grey pixels, with ``body`` as its
    compressed rows (none by default): what a decompression bomb looks like before decoding."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", body)
        + png_chunk(b"IEND", b"")
    )


@pytest.fixture(scope="session")
def vision_model() -> Iterator[llama_cpp.llama_model_p]:
    llama_cpp_log.install()  # quiet, as the worker keeps it
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.load_mtp = True
    model = llama_cpp.llama_model_load_from_file(str(DEMO_VISION_MODEL).encode(), params)
    assert model, f"llama.cpp could not load {DEMO_VISION_MODEL}"
    yield model
    llama_cpp.llama_model_free(model)


@pytest.fixture(scope="session")
def projector(vision_model) -> Iterator[VisionProjector]:
    with VisionProjector(DEMO_VISION_PROJECTOR, vision_model, threads=1, use_gpu=False) as loaded:
        yield loaded


@pytest.fixture
def new_context(vision_model) -> Iterator[Callable[[], llama_cpp.llama_context_p]]:
    """Fresh llama.cpp contexts on the vision model, freed after the test."""
    made = []

    def make() -> llama_cpp.llama_context_p:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = 2048, BATCH, BATCH
        params.n_threads = params.n_threads_batch = 1
        context = llama_cpp.llama_init_from_model(vision_model, params)
        assert context
        made.append(context)
        return context

    yield make
    for context in made:
        llama_cpp.llama_free(context)


def last_logits(model: llama_cpp.llama_model_p, context: llama_cpp.llama_context_p) -> np.ndarray:
    vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(context, -1), (vocab,)).copy()


def decode_text(context: llama_cpp.llama_context_p, tokens, position: int) -> int:
    """Text rows decoded as the runtime's backend decodes them (its own batch, llama_decode)."""
    batch = NumpyBatch(BATCH)
    for start in range(0, len(tokens), BATCH):
        piece = tokens[start : start + BATCH]
        last = start + BATCH >= len(tokens)
        filled = batch.fill(piece, position + start, outputs="last" if last else "none")
        assert llama_cpp.llama_decode(context, filled) == 0
    return position + len(tokens)


def evaluate_by_chunks(
    projector: VisionProjector,
    prompt: ImagePrompt,
    context: llama_cpp.llama_context_p,
    position: int,
) -> int:
    """Text chunks through :func:`decode_text`, images through the projector: the runtime's way."""
    for index, chunk in enumerate(prompt.chunks):
        if chunk.kind == TEXT:
            position = decode_text(context, chunk.tokens, position)
        else:
            position = projector.evaluate_image(prompt, index, context, position, BATCH)
    return position
