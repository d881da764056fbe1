"""Replies about a picture on the vision demo, through the runtime's own loop (docs/vision.md).

What a user relies on: a question with a picture gets the answer llama.cpp's own multimodal path
gives; drafting with the MTP head changes nothing in what is said (greedy MTP == plain decoding
with the same picture, depths 1–3, with rejected and accepted drafts after the picture); a
follow-up question about the same picture does not run the vision encoder again and answers as
a fresh process would; a model without a projector says so in one line.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.engine.errors import ImageError
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.images import ImageLimits, read_image
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import (
    DEMO_VISION_MODEL,
    DEMO_VISION_PROJECTOR,
    demo_model_path,
)
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.vision.conftest import picture

GREEDY = SamplerSettings(temperature=0)
QUESTIONS = ("Return the sum of a list.", "Write a class for a stack.")


@pytest.fixture(scope="module")
def vision_backend() -> Iterator[LlamaCppBackend]:
    settings = LoadSettings(threads=1, context_length=2048, projector=DEMO_VISION_PROJECTOR)
    loaded = LlamaCppBackend(DEMO_VISION_MODEL, settings)
    yield loaded
    loaded.close()


def image(width: int, height: int, seed: int):
    return read_image(picture(width, height, seed=seed), ImageLimits(), "test picture")


def asking(question: str, *images, offset: int = 0) -> ChatMessage:
    return ChatMessage("user", question, images=tuple(PlacedImage(offset, i) for i in images))


def reply(
    backend: LlamaCppBackend, messages, depth: int, *, fresh: bool = True, tokens: int = 48
) -> GenerationResult:
    if fresh:
        backend.reset()
    request = GenerationRequest(
        messages=tuple(messages), max_tokens=tokens, sampler=GREEDY, mtp_depth=depth
    )
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def test_the_model_says_it_reads_images(vision_backend: LlamaCppBackend) -> None:
    info = vision_backend.info
    assert info.reads_images and info.projector == DEMO_VISION_PROJECTOR
    assert info.images_unavailable_reason is None


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_greedy_mtp_with_a_picture_is_plain_decoding_with_it(
    vision_backend: LlamaCppBackend, depth: int
) -> None:
    rejected = accepted = 0
    pictures = (image(96, 64, seed=11), image(160, 128, seed=12))
    for question, shown in zip(QUESTIONS, pictures, strict=True):
        messages = [asking(question, shown)]
        plain = reply(vision_backend, messages, 0)
        drafted = reply(vision_backend, messages, depth)
        assert drafted.token_ids == plain.token_ids
        assert drafted.text == plain.text
        stats = drafted.stats
        assert stats.prompt_images_encoded == 1 and stats.cycles > 0
        rejected += stats.cycles - stats.accepted_by_depth[0]
        accepted += stats.accepted_by_depth[0]
        # the picture is read: without it the same question is answered differently
        assert reply(vision_backend, [asking(question)], 0).token_ids != plain.token_ids
    assert rejected > 0 and accepted > 0


def test_two_pictures_in_one_turn_and_text_between_them(vision_backend) -> None:
    messages = [
        ChatMessage(
            "user",
            "Compare these: and this one.",
            images=(
                PlacedImage(15, image(64, 64, seed=2)),
                PlacedImage(28, image(64, 128, seed=3)),
            ),
        )
    ]
    plain = reply(vision_backend, messages, 0)
    assert reply(vision_backend, messages, 3).token_ids == plain.token_ids
    assert plain.stats.prompt_images_encoded == 2
    # 64×64 and 64×128 take 4×4 = 16 (the projector's minimum is 8) and 2×4 = 8 cells … the
    # cells of both images are counted in the prompt, their positions are not
    text_only = reply(vision_backend, [ChatMessage("user", "Compare these: and this one.")], 0)
    assert plain.prompt_token_count > text_only.prompt_token_count + 4


@pytest.mark.parametrize("depth", [0, 2])
def test_a_follow_up_about_the_same_picture_does_not_encode_it_again(
    vision_backend: LlamaCppBackend, depth: int
) -> None:
    shown = image(160, 96, seed=21)
    first_turn = [asking(QUESTIONS[0], shown)]
    first = reply(vision_backend, first_turn, depth)
    follow_up = [
        *first_turn,
        ChatMessage("assistant", first.text),
        ChatMessage("user", "Now make it shorter."),
    ]
    continued = reply(vision_backend, follow_up, depth, fresh=False)
    stats = continued.stats
    assert stats.prompt_images_encoded == 0
    assert stats.prompt_reused_tokens >= first.prompt_token_count
    fresh = reply(vision_backend, follow_up, depth)
    assert fresh.stats.prompt_images_encoded == 1
    assert continued.token_ids == fresh.token_ids


def test_the_same_picture_re_encoded_as_webp_is_still_reused(vision_backend) -> None:
    png = read_image(picture(96, 96, seed=31), ImageLimits(), "png")
    webp = read_image(
        picture(96, 96, seed=31, image_format="WEBP", lossless=True), ImageLimits(), "webp"
    )
    first = reply(vision_backend, [asking(QUESTIONS[1], png)], 2)
    again = reply(
        vision_backend,
        [asking(QUESTIONS[1], png), ChatMessage("assistant", first.text), asking("More.", webp)],
        2,
        fresh=False,
    )
    assert again.stats.prompt_images_encoded == 1  # the new turn's picture only


def test_editing_the_question_after_a_picture_keeps_the_picture(vision_backend) -> None:
    """Edit resumes at the checkpoint kept where the last user message starts (a history of
    at least 64 tokens before it): after the picture, which is kept, not encoded again."""
    shown = image(128, 128, seed=41)
    answer = "I see it. " + "It is a square picture with a gradient and some noise. " * 6
    history = [asking("Here is a picture.", shown), ChatMessage("assistant", answer)]
    reply(vision_backend, [*history, ChatMessage("user", QUESTIONS[0])], 2)
    edited = [*history, ChatMessage("user", QUESTIONS[1])]
    resumed = reply(vision_backend, edited, 2, fresh=False)
    assert resumed.stats.prompt_images_encoded == 0
    assert resumed.stats.prompt_reused_tokens > 64
    assert resumed.token_ids == reply(vision_backend, edited, 2).token_ids


def test_a_model_without_a_projector_says_so_in_one_line() -> None:
    backend = LlamaCppBackend(demo_model_path(), LoadSettings(threads=1, context_length=512))
    try:
        assert not backend.info.reads_images
        with pytest.raises(ImageError) as refused:
            reply(backend, [asking("What is it?", image(32, 32, seed=1))], 0)
    finally:
        backend.close()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("demo-mtp.gguf has no vision projector")
    assert "--mmproj FILE" in message


def test_a_conversation_with_a_picture_comes_back_after_another_took_the_model(
    vision_backend: LlamaCppBackend,
) -> None:
    """Another conversation displaces this one (its whole state is saved, picture included);
    its next turn restores it and encodes nothing."""
    shown = image(160, 160, seed=51)
    opening = [asking("Look at this picture carefully. " * 4, shown)]
    first = reply(vision_backend, opening, 2, tokens=40)
    reply(vision_backend, [ChatMessage("user", "Something else entirely.")], 2, fresh=False)
    back = [*opening, ChatMessage("assistant", first.text), ChatMessage("user", "Go on.")]
    restored = reply(vision_backend, back, 2, fresh=False)
    assert restored.stats.prompt_images_encoded == 0
    assert vision_backend.last_prefix_reuse.source == "saved"
    assert restored.token_ids == reply(vision_backend, back, 2).token_ids
