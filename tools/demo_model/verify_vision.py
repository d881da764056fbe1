"""Checks that the pinned llama.cpp runs the vision demo: both files load, an image evaluates.

The trunk is loaded as the app loads it (with its MTP block), the projector through the app's own
mtmd module, and a generated test picture is split into chunks and evaluated into a context by
llama.cpp's helper. The figures (tokens and positions the image took, whether the logits after it
are finite and differ from the same prompt without the image) go into the report.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np
from PIL import Image

from app.engine.runtime.backends.llama_cpp.images import IMAGE, VisionProjector
from app.engine.runtime.chat_format.images import ImageLimits, read_image, rgb_pixels

TEST_SIZE = (96, 64)


@dataclass(frozen=True)
class ImageCheck:
    image_size: tuple[int, int]
    image_tokens: int
    image_positions: int
    prompt_tokens: int
    uses_mrope: bool
    logits_finite: bool
    max_abs_logit_change_from_image: float


def test_picture() -> bytes:
    """A deterministic RGB gradient, as a PNG file."""
    width, height = TEST_SIZE
    x = np.linspace(0, 255, width, dtype=np.float64)[None, :, None]
    y = np.linspace(0, 255, height, dtype=np.float64)[:, None, None]
    pixels = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def check_image_evaluation(gguf_path: Path, projector_path: Path) -> ImageCheck:
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.load_mtp = True
    model = llama_cpp.llama_model_load_from_file(str(gguf_path).encode(), params)
    if not model:
        raise SystemExit(f"llama.cpp could not load {gguf_path}")
    picture = rgb_pixels(read_image(test_picture(), ImageLimits(), "test picture"))
    try:
        with VisionProjector(projector_path, model, threads=1, use_gpu=False) as projector:
            text = f"<|im_start|>user\n{projector.marker}What is this?<|im_end|>\n"
            with projector.split(text + "<|im_start|>assistant\n", [picture]) as prompt:
                image = next(chunk for chunk in prompt.chunks if chunk.kind == IMAGE)
                with_image = _last_logits(
                    model, lambda ctx: projector.evaluate_all(prompt, ctx, 0, 512)
                )
                tokens = prompt.n_tokens
            with projector.split(
                text.replace(projector.marker, "") + "<|im_start|>assistant\n", []
            ) as plain:
                without = _last_logits(
                    model, lambda ctx: projector.evaluate_all(plain, ctx, 0, 512)
                )
            mrope = projector.uses_mrope
    finally:
        llama_cpp.llama_model_free(model)
    return ImageCheck(
        image_size=TEST_SIZE,
        image_tokens=image.n_tokens,
        image_positions=image.n_positions,
        prompt_tokens=tokens,
        uses_mrope=mrope,
        logits_finite=bool(np.isfinite(with_image).all()),
        max_abs_logit_change_from_image=float(np.abs(with_image - without).max()),
    )


def _last_logits(model: llama_cpp.llama_model_p, evaluate) -> np.ndarray:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = 1024, 512, 512
    params.n_threads = params.n_threads_batch = 1
    ctx = llama_cpp.llama_init_from_model(model, params)
    try:
        evaluate(ctx)
        vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), (vocab,)).copy()
    finally:
        llama_cpp.llama_free(ctx)
