"""Pictures on the MLX backend, through mlx-vlm's model classes, on the MLX vision demo
(``resources/models/demo-vision-mlx``, made by ``tools/make_mlx_vision_model.py`` with mlx-vlm's
converter): greedy with one or two pictures is mlx-vlm's own ``generate`` token for token; a
prompt with pictures drafts with the model's MTP head (rows paired with mlx-vlm's hidden
states) and greedy MTP equals plain decoding with the picture, while text on the same model still
drafts through mlx-lm's trunk; a follow-up about the same picture encodes nothing and answers what
a fresh model answers, drafting or not; a text-only folder and a text-only load say in one line
why they read no pictures."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from mlx_vlm import generate as vlm_generate
from mlx_vlm import load as vlm_load
from PIL import Image

from app.engine.errors import ImageError
from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.images import ImageLimits, read_image
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import DEMO_VISION_MLX_DIR
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.vision.conftest import picture

GREEDY = SamplerSettings(temperature=0.0)
FIRST = picture(96, 64, seed=1)
SECOND = picture(64, 80, seed=2)
QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"


@pytest.fixture(scope="module")
def vision_mlx() -> Iterator[MlxBackend]:
    backend = MlxBackend(DEMO_VISION_MLX_DIR, LoadSettings())
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def mlx_vlm_model() -> tuple[object, object]:
    return vlm_load(str(DEMO_VISION_MLX_DIR))


def _shown(data: bytes) -> PlacedImage:
    return PlacedImage(0, read_image(data, ImageLimits(), "picture"))


def _run(backend: MlxBackend, messages: tuple[ChatMessage, ...], **fields) -> GenerationResult:
    request = GenerationRequest(messages=messages, sampler=GREEDY, **fields)
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def _reference(model_and_processor, prompt: str, pictures: list[bytes], tokens: int) -> list[int]:
    """mlx-vlm's own greedy generate on the same prompt text and pictures."""
    model, processor = model_and_processor
    images = [Image.open(io.BytesIO(data)).convert("RGB") for data in pictures]
    result = vlm_generate(
        model, processor, prompt, image=images, max_tokens=tokens, temperature=0.0, verbose=False
    )
    return list(result.token_ids)


@pytest.mark.slow
def test_greedy_with_a_picture_is_mlx_vlms_own_generate(vision_mlx, mlx_vlm_model) -> None:
    assert vision_mlx.info.reads_images and vision_mlx.info.images_unavailable_reason is None
    question = "What is in the picture?"
    reply = _run(
        vision_mlx, (ChatMessage("user", question, images=(_shown(FIRST),)),), max_tokens=16
    )
    prompt = f"<|im_start|>user\n{QWEN_IMAGE}{question}<|im_end|>\n<|im_start|>assistant\n"
    assert list(reply.token_ids) == _reference(mlx_vlm_model, prompt, [FIRST], 16)
    assert reply.stats.prompt_images_encoded == 1
    assert reply.note is None and reply.stats.mode != "ar"  # drafted with the head (depth 2)
    assert reply.stats.cycles > 0


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.slow
def test_greedy_mtp_with_a_picture_is_plain_decoding_with_it(vision_mlx, depth: int) -> None:
    asked = (ChatMessage("user", "Describe it.", images=(_shown(SECOND),)),)
    vision_mlx.reset()
    plain = _run(vision_mlx, asked, max_tokens=20, mtp_depth=0)
    vision_mlx.reset()
    drafted = _run(vision_mlx, asked, max_tokens=20, mtp_depth=depth, adaptive_depth=False)
    assert drafted.stats.mode != "ar" and drafted.stats.cycles > 0
    assert sum(drafted.stats.drafted_by_depth) > 0
    assert drafted.token_ids == plain.token_ids


@pytest.mark.slow
def test_two_pictures_with_text_between_them_are_mlx_vlms_own_generate(
    vision_mlx, mlx_vlm_model
) -> None:
    text = "Compare  and  please."  # pictures at offsets 8 and 13
    first, second = read_image(FIRST, ImageLimits(), "a"), read_image(SECOND, ImageLimits(), "b")
    message = ChatMessage("user", text, images=(PlacedImage(8, first), PlacedImage(13, second)))
    reply = _run(vision_mlx, (message,), max_tokens=12, mtp_depth=0)
    prompt = (
        f"<|im_start|>user\nCompare {QWEN_IMAGE} and {QWEN_IMAGE} please.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert list(reply.token_ids) == _reference(mlx_vlm_model, prompt, [FIRST, SECOND], 12)
    assert reply.stats.prompt_images_encoded == 2
    assert reply.note is None  # plain was asked for: nothing to explain


@pytest.mark.slow
def test_a_follow_up_about_the_same_picture_encodes_nothing_and_answers_as_fresh(
    vision_mlx,
) -> None:
    asked = ChatMessage("user", "Describe it.", images=(_shown(FIRST),))
    for depth in (0, 2):
        vision_mlx.reset()
        first = _run(vision_mlx, (asked,), max_tokens=10, mtp_depth=depth)
        follow_up = (asked, ChatMessage("assistant", first.text), ChatMessage("user", "Colours?"))
        again = _run(vision_mlx, follow_up, max_tokens=10, mtp_depth=depth)
        assert again.stats.prompt_images_encoded == 0
        assert vision_mlx.last_prefix_reuse.reused_tokens >= first.prompt_token_count
        vision_mlx.reset()
        fresh = _run(vision_mlx, follow_up, max_tokens=10, mtp_depth=0)
        assert fresh.stats.prompt_images_encoded == 1
        assert fresh.token_ids == again.token_ids


@pytest.mark.slow
def test_another_picture_in_the_same_place_is_encoded_again(vision_mlx) -> None:
    vision_mlx.reset()
    _run(vision_mlx, (ChatMessage("user", "Describe it.", images=(_shown(FIRST),)),), max_tokens=4)
    other = _run(
        vision_mlx, (ChatMessage("user", "Describe it.", images=(_shown(SECOND),)),), max_tokens=4
    )
    assert other.stats.prompt_images_encoded == 1
    assert vision_mlx.last_prefix_reuse.reused_tokens == 0


@pytest.mark.slow
def test_text_on_the_vision_model_still_drafts_with_its_head_and_stays_exact(vision_mlx) -> None:
    question = (ChatMessage("user", "def add(a, b):"),)
    drafted = _run(vision_mlx, question, max_tokens=24, mtp_depth=2)
    plain = _run(vision_mlx, question, max_tokens=24, mtp_depth=0)
    assert drafted.stats.mode != "ar" and drafted.note is None
    assert drafted.stats.cycles > 0
    assert drafted.token_ids == plain.token_ids


def test_a_text_only_load_of_the_vision_model_says_so_in_one_line() -> None:
    backend = MlxBackend(DEMO_VISION_MLX_DIR, LoadSettings(images=False))
    try:
        assert not backend.info.reads_images
        with pytest.raises(ImageError) as refused:
            _run(backend, (ChatMessage("user", "What?", images=(_shown(FIRST),)),), max_tokens=2)
        assert str(refused.value).startswith("demo-vision-mlx was loaded for text only")
        assert "\n" not in str(refused.value)
    finally:
        backend.close()


def test_the_language_model_is_in_memory_once(vision_mlx) -> None:
    """mlx-vlm's language model runs on the arrays mlx-lm loaded for the trunk, not a copy."""
    from mlx.utils import tree_flatten

    vision_language = [
        array for _, array in tree_flatten(vision_mlx._vision._language.parameters())
    ]
    trunk = {id(array) for _, array in tree_flatten(vision_mlx._model.parameters())}
    assert len(vision_language) > 50
    assert all(id(array) in trunk for array in vision_language)


@pytest.mark.slow
def test_text_and_pictures_taking_turns_on_one_model_answer_as_fresh(vision_mlx) -> None:
    """The head's queued rows go to the conversation they belong to when requests switch
    between the picture lane and the text path; every reply is what a fresh model gives."""
    text = (ChatMessage("user", "def add(a, b):"),)
    asked = ChatMessage("user", "Describe it.", images=(_shown(FIRST),))
    pictured = (asked,)
    vision_mlx.reset()
    turns = [_run(vision_mlx, text, max_tokens=12), _run(vision_mlx, pictured, max_tokens=12)]
    follow_up = (asked, ChatMessage("assistant", turns[1].text), ChatMessage("user", "More?"))
    turns += [_run(vision_mlx, text, max_tokens=12), _run(vision_mlx, follow_up, max_tokens=12)]
    assert turns[3].stats.prompt_images_encoded == 0  # the lane kept its picture across the text
    for turn, messages in zip(turns, (text, pictured, text, follow_up), strict=True):
        vision_mlx.reset()
        assert _run(vision_mlx, messages, max_tokens=12, mtp_depth=0).token_ids == turn.token_ids
