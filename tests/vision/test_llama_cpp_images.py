"""Images through llama.cpp's multimodal library, on the shipped vision demo.

What a user relies on: a prompt with pictures is split where the pictures stand, each picture
takes the tokens and positions the projector gives it, and the model's output after a picture is
exactly what llama.cpp's own multimodal path gives (the runtime decodes text its own way and only
hands pictures to mtmd), from the start of a context or after text already there.
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from app.engine.errors import ImageError, RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.images import IMAGE, TEXT, VisionProjector
from app.engine.runtime.chat_format.images import ImageLimits, read_image, rgb_pixels
from app.engine.runtime.core.demo_model import DEMO_VISION_PROJECTOR
from tests.vision.conftest import (
    BATCH,
    decode_text,
    evaluate_by_chunks,
    last_logits,
    picture,
)

LIMITS = ImageLimits()


def pixels(data: bytes):
    return rgb_pixels(read_image(data, LIMITS, "test"))


def chat(projector: VisionProjector, *texts: str) -> str:
    body = "".join(texts)
    return f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n"


def tokenize(model, text: str) -> list[int]:
    vocab = llama_cpp.llama_model_get_vocab(model)
    data = text.encode()
    buffer = (llama_cpp.llama_token * (len(data) + 8))()
    count = llama_cpp.llama_tokenize(vocab, data, len(data), buffer, len(data) + 8, False, True)
    return list(buffer[:count])


def test_a_prompt_splits_into_text_the_picture_and_text(projector, vision_model) -> None:
    image = pixels(picture(96, 64))
    text = chat(projector, "Look: ", projector.marker, " What is it?")
    with projector.split(text, [image]) as prompt:
        kinds = [chunk.kind for chunk in prompt.chunks]
        assert kinds == [TEXT, IMAGE, TEXT]
        before, picture_chunk, after = prompt.chunks
        # mtmd wraps the picture in the model's own vision tokens
        assert list(before.tokens) == tokenize(
            vision_model, "<|im_start|>user\nLook: <|vision_start|>"
        )
        assert list(after.tokens) == tokenize(
            vision_model, "<|vision_end|> What is it?<|im_end|>\n<|im_start|>assistant\n"
        )
        # 96×64 is scaled up to the projector's minimum of 8 tokens: 128×96 px → 4×3 tokens of
        # 32×32 px; on an M-RoPE model a 4×3 picture advances the position by max(4, 3)
        assert (picture_chunk.n_tokens, picture_chunk.n_positions) == (12, 4)
        assert picture_chunk.image_hash == image.content_hash
        assert picture_chunk.tokens == ()
        assert prompt.n_tokens == before.n_tokens + 12 + after.n_tokens
        assert prompt.n_positions == before.n_tokens + 4 + after.n_tokens
    assert projector.uses_mrope


def test_logits_after_a_picture_equal_llama_cpps_own_path(
    projector, vision_model, new_context
) -> None:
    text = chat(projector, projector.marker, "Describe this picture.")
    with projector.split(text, [pixels(picture(160, 96, seed=1))]) as prompt:
        ours, reference = new_context(), new_context()
        end = evaluate_by_chunks(projector, prompt, ours, 0)
        expected_end = projector.evaluate_all(prompt, reference, 0, BATCH)
    assert end == expected_end == prompt.n_positions
    difference = np.abs(last_logits(vision_model, ours) - last_logits(vision_model, reference))
    assert difference.max() == 0.0


def test_pictures_evaluate_after_text_already_in_the_context(
    projector, vision_model, new_context
) -> None:
    """A follow-up turn: the conversation so far is in the context; the new turn with two
    pictures is evaluated from where it ends, and matches one evaluation of the whole."""
    history = chat(projector, "Hello.") + "Hello! How can I help?<|im_end|>\n"
    turn = chat(projector, projector.marker, " and ", projector.marker, " — which is brighter?")
    images = [pixels(picture(64, 64, seed=2)), pixels(picture(64, 128, seed=3))]
    continued, whole = new_context(), new_context()
    start = decode_text(continued, tokenize(vision_model, history), 0)
    with projector.split(turn, images) as prompt:
        end = evaluate_by_chunks(projector, prompt, continued, start)
    with projector.split(history + turn, images) as prompt:
        assert [c.kind for c in prompt.chunks] == [TEXT, IMAGE, TEXT, IMAGE, TEXT]
        whole_end = projector.evaluate_all(prompt, whole, 0, BATCH)
    assert end == whole_end
    difference = np.abs(last_logits(vision_model, continued) - last_logits(vision_model, whole))
    assert difference.max() == 0.0


def test_the_picture_changes_the_output_and_the_same_picture_gives_the_same_output(
    projector, vision_model, new_context
) -> None:
    text = chat(projector, projector.marker, "What is it?")

    def logits_for(data: bytes) -> np.ndarray:
        context = new_context()
        with projector.split(text, [pixels(data)]) as prompt:
            evaluate_by_chunks(projector, prompt, context, 0)
        return last_logits(vision_model, context)

    first = logits_for(picture(96, 96, seed=4))
    again = logits_for(picture(96, 96, seed=4))
    other = logits_for(picture(96, 96, seed=5))
    assert np.array_equal(first, again)
    assert np.abs(first - other).max() > 1e-3


def test_the_content_hash_follows_the_pixels_not_the_file_encoding() -> None:
    png = picture(80, 48, seed=6)
    lossless_webp = picture(80, 48, seed=6, image_format="WEBP", lossless=True)
    assert read_image(png, LIMITS, "a").sha256 != read_image(lossless_webp, LIMITS, "b").sha256
    assert pixels(png).content_hash == pixels(lossless_webp).content_hash
    assert pixels(png).content_hash != pixels(picture(80, 48, seed=7)).content_hash


def test_text_that_looks_like_a_marker_is_only_text(projector) -> None:
    """llama.cpp's default marker typed by a user is text, and a prompt whose image places do
    not match the images given is refused before anything is evaluated."""
    text = chat(projector, "my template says <__media__> here")
    with projector.split(text, []) as prompt:
        assert [chunk.kind for chunk in prompt.chunks] == [TEXT]
    with pytest.raises(ImageError, match=r"1 image place.* for 0 image"):
        projector.split(chat(projector, projector.marker), [])
    with pytest.raises(ImageError, match=r"0 image place.* for 1 image"):
        projector.split(chat(projector, "no place"), [pixels(picture(32, 32))])


def test_each_projector_has_its_own_marker(projector, vision_model) -> None:
    with VisionProjector(DEMO_VISION_PROJECTOR, vision_model, threads=1, use_gpu=False) as other:
        assert other.marker != projector.marker


def test_a_damaged_projector_is_refused_with_its_name(tmp_path: Path, vision_model) -> None:
    damaged = tmp_path / "mmproj-damaged.gguf"
    damaged.write_bytes(DEMO_VISION_PROJECTOR.read_bytes()[:4096])
    with pytest.raises(RuntimeBackendError, match=r"mmproj-damaged\.gguf"):
        VisionProjector(damaged, vision_model, threads=1, use_gpu=False)
