"""Images in chat turns: they stand at their places in the text, survive the rewriting of tool
turns for templates without tool support, and reach the prompt as the projector's marker; a model
without a projector refuses them with the reason instead of dropping them."""

from __future__ import annotations

import pytest

from app.engine.errors import ImageError
from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.runtime.chat_format.images import ImageLimits, read_image
from app.engine.runtime.chat_format.prompting import (
    ChatMessage,
    PlacedImage,
    images_of,
    render_chat,
)
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL
from tests.vision.conftest import picture

MARK = "<IMG>"
CAT = read_image(picture(32, 32, seed=1), ImageLimits(), "cat")
DOG = read_image(picture(32, 32, seed=2), ImageLimits(), "dog")
SPECIALS = {"bos_token": "", "eos_token": "<|im_end|>"}


def test_images_stand_where_they_were_placed() -> None:
    message = ChatMessage(
        "user",
        "Compare  and  please.",
        images=(PlacedImage(0, CAT), PlacedImage(8, DOG), PlacedImage(8, CAT)),
    )
    assert message.text_with(MARK) == "<IMG>Compare <IMG><IMG> and  please."
    assert images_of([message, ChatMessage("user", "no pictures")]) == (CAT, DOG, CAT)


def test_places_outside_the_text_or_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        ChatMessage("user", "ab", images=(PlacedImage(3, CAT),))
    with pytest.raises(ValueError, match="do not fit"):
        ChatMessage("user", "abc", images=(PlacedImage(2, CAT), PlacedImage(1, DOG)))


def test_the_vision_demos_template_gets_the_marker_in_the_text() -> None:
    template = read_gguf_summary(DEMO_VISION_MODEL).chat_template
    messages = [ChatMessage("user", "What is this?", images=(PlacedImage(0, CAT),))]
    text = render_chat(
        template, messages, special_tokens=SPECIALS, model_name="demo", image_marker=MARK
    )
    assert text == "<|im_start|>user\n<IMG>What is this?<|im_end|>\n<|im_start|>assistant\n"


def test_a_model_without_a_projector_refuses_images_with_the_reason() -> None:
    messages = [ChatMessage("user", "What is this?", images=(PlacedImage(0, CAT),))]
    with pytest.raises(ImageError) as caught:
        render_chat(None, messages, special_tokens=SPECIALS, model_name="demo-mtp.gguf")
    assert str(caught.value).startswith(
        "demo-mtp.gguf has no vision projector (an mmproj-*.gguf file beside the model), so it "
        "cannot read images"
    )
    # text alone still renders
    plain = [ChatMessage("user", "Hello")]
    assert render_chat(None, plain, special_tokens=SPECIALS, model_name="m") == "Hello"


def test_images_in_tool_results_keep_their_places_when_tool_turns_become_text() -> None:
    """A template without tool support gets results as <tool_response> blocks in a user turn;
    two results in a row share one turn, each picture still beside its own text."""
    messages = [
        ChatMessage("user", "Show me both."),
        ChatMessage("assistant", "", tool_calls=()),
        ChatMessage("tool", "cat.png", tool_call_id="1", images=(PlacedImage(0, CAT),)),
        ChatMessage("tool", "dog.png", tool_call_id="2", images=(PlacedImage(7, DOG),)),
    ]
    template = read_gguf_summary(DEMO_VISION_MODEL).chat_template
    text = render_chat(
        template, messages, special_tokens=SPECIALS, model_name="demo", image_marker=MARK
    )
    assert (
        "<|im_start|>user\n<tool_response>\n<IMG>cat.png\n</tool_response>\n"
        "<tool_response>\ndog.png<IMG>\n</tool_response><|im_end|>"
    ) in text


def test_a_template_less_model_writes_markers_into_its_plain_text() -> None:
    messages = [ChatMessage("user", "Look: ", images=(PlacedImage(6, DOG),))]
    text = render_chat(None, messages, special_tokens=SPECIALS, model_name="m", image_marker=MARK)
    assert text == "Look: <IMG>"
