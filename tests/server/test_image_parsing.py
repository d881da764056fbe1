"""Images in request bodies, read by the parsers: OpenAI ``image_url`` parts and Anthropic
``image`` blocks (in user turns and tool results) become pictures at their places in the text;
every refusal is a 400 naming the field, a picture over the byte limit a 413, and remote URLs are
fetched only when allowed, within limits."""

from __future__ import annotations

import asyncio
import base64

import pytest

from app.engine.runtime.chat_format.images import ImageLimits
from app.engine.server.anthropic.parsing import parse_messages_body
from app.engine.server.core.api_errors import ApiError
from app.engine.server.core.images import ImageRules, RequestImages, remote_urls
from app.engine.server.core.remote_images import fetch_images
from app.engine.server.openai.parsing import RequestDefaults, parse_chat_body
from tests.server.conftest import PICTURE
from tests.vision.conftest import picture, png_declaring

DEFAULTS = RequestDefaults(depth="auto", max_tokens=64, max_depth=8)
PNG = PICTURE  # also what the picture_site fixture serves at /cat.png
WEBP = picture(48, 32, seed=3, image_format="WEBP")
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def openai(content, rules: ImageRules | None = None, fetched=None, role: str = "user"):
    body = {"messages": [{"role": role, "content": content}]}
    images = RequestImages(rules or ImageRules(), fetched)
    return parse_chat_body(body, DEFAULTS, images).generation.messages


def refusal(call) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def test_openai_image_parts_stand_between_the_text_parts() -> None:
    (message,) = openai(
        [
            {"type": "text", "text": "Left: "},
            {"type": "image_url", "image_url": {"url": DATA_URL, "detail": "high"}},
            {"type": "text", "text": " right: "},
            {"type": "image_url", "image_url": {"url": DATA_URL}},
        ]
    )
    assert message.content == "Left:  right: "
    assert [placed.offset for placed in message.images] == [6, 14]
    assert message.images[0].image.data == PNG
    assert message.text_with("[i]") == "Left: [i] right: [i]"


@pytest.mark.parametrize(
    ("content", "param", "words"),
    [
        (
            [{"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lG"}}],
            "messages[0].content[0].image_url.url",
            "image/png, image/jpeg and image/webp",
        ),
        (
            [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}],
            "messages[0].content[0].image_url.url",
            "not valid base64",
        ),
        (
            [{"type": "image_url", "image_url": {"url": "data:image/png,rawbytes"}}],
            "messages[0].content[0].image_url.url",
            "must be a base64 data: URL",
        ),
        (
            [{"type": "image_url", "image_url": {"url": "http://example.com/cat.png"}}],
            "messages[0].content[0].image_url.url",
            "--allow-remote-images",
        ),
        (
            [{"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}],
            "messages[0].content[0].image_url.url",
            "send a data: URL",
        ),
        (
            [{"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}],
            "messages[0].content[0].image_url.url",
            "not a readable image",
        ),
        ([{"type": "input_audio", "input_audio": {}}], "messages[0].content[0]", "input_audio"),
    ],
)
def test_openai_image_refusals_name_the_field(content, param: str, words: str) -> None:
    error = refusal(lambda: openai(content))
    assert (error.status, error.param) == (400, param)
    assert words in error.message


def test_only_user_messages_may_hold_images() -> None:
    part = {"type": "image_url", "image_url": {"url": DATA_URL}}
    error = refusal(lambda: openai([part], role="assistant"))
    assert error.status == 400 and "assistant messages may hold only text parts" in error.message


def test_too_many_images_is_a_400_and_a_picture_over_the_byte_limit_a_413() -> None:
    part = {"type": "image_url", "image_url": {"url": DATA_URL}}
    error = refusal(lambda: openai([part] * 3, ImageRules(max_images=2)))
    assert error.status == 400 and error.param == "messages[0].content[2].image_url.url"
    assert "at most 2 images" in error.message
    tight = ImageRules(limits=ImageLimits(max_bytes=2**20))
    big = "data:image/png;base64," + "A" * (2 * 2**20)  # measured before it is decoded
    error = refusal(lambda: openai([{"type": "image_url", "image_url": {"url": big}}], tight))
    assert (error.status, error.code) == (413, "image_too_large")
    assert "images may be at most 1 MiB" in error.message


def test_a_decompression_bomb_in_a_data_url_is_a_400() -> None:
    bomb = "data:image/png;base64," + base64.b64encode(png_declaring(30_000, 30_000)).decode()
    error = refusal(lambda: openai([{"type": "image_url", "image_url": {"url": bomb}}]))
    assert error.status == 400 and "pixels" in error.message


def anthropic_body(content) -> dict:
    return {"max_tokens": 8, "messages": content}


def base64_block(data: bytes, media_type: str = "image/png") -> dict:
    source = {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}
    return {"type": "image", "source": source}


def test_anthropic_image_blocks_in_user_turns_and_tool_results() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is "},
                base64_block(WEBP, "image/webp"),
                {"type": "text", "text": "?"},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "screen:"}, base64_block(PNG)],
                },
                {"type": "image", "source": {"type": "url", "url": DATA_URL}},
            ],
        },
    ]
    parsed = parse_messages_body(anthropic_body(messages), DEFAULTS, RequestImages(ImageRules()))
    user, _assistant, tool, after = parsed.generation.messages
    assert user.text_with("[i]") == "What is [i]?" and user.images[0].image.data == WEBP
    assert (tool.role, tool.text_with("[i]")) == ("tool", "screen:[i]")
    assert tool.images[0].image.data == PNG
    assert (after.role, after.text_with("[i]")) == ("user", "[i]")


def test_an_image_marked_as_an_error_result_keeps_its_place() -> None:
    messages = [
        {"role": "user", "content": "Go."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "is_error": True,
                    "content": [base64_block(PNG)],
                }
            ],
        },
    ]
    parsed = parse_messages_body(anthropic_body(messages), DEFAULTS, RequestImages(ImageRules()))
    assert parsed.generation.messages[-1].text_with("[i]") == "Error: [i]"


@pytest.mark.parametrize(
    ("block", "param", "words"),
    [
        (
            {"type": "image", "source": {"type": "file", "file_id": "f"}},
            "messages[0].content[0].source",
            'got a source of type "file"',
        ),
        (base64_block(PNG, "image/gif"), "messages[0].content[0].source", "image/png, image/jpeg"),
        (
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            "messages[0].content[0].source.url",
            "--allow-remote-images",
        ),
        (
            {"type": "search_result", "source": "x"},
            "messages[0].content[0]",
            'type "search_result"',
        ),
    ],
)
def test_anthropic_image_refusals_name_the_block(block, param: str, words: str) -> None:
    body = anthropic_body([{"role": "user", "content": [block]}])
    error = refusal(lambda: parse_messages_body(body, DEFAULTS, RequestImages(ImageRules())))
    assert (error.status, error.param) == (400, param) and words in error.message


def test_remote_urls_are_fetched_only_when_allowed_and_within_limits(picture_site: str) -> None:
    cat = f"{picture_site}/cat.png"
    content = [
        {"type": "image_url", "image_url": {"url": cat}},
        {"type": "image_url", "image_url": {"url": cat}},
    ]
    urls = remote_urls({"messages": [{"role": "user", "content": content}]})
    assert urls == (cat,)  # each URL once
    fetched = asyncio.run(fetch_images(urls, 2**20))
    assert fetched == {cat: PNG}
    (message,) = openai(content, ImageRules(allow_remote=True), fetched)
    assert [placed.image.data for placed in message.images] == [PNG, PNG]

    anthropic_turns = [
        {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": cat}}]}
    ]
    assert remote_urls({"messages": anthropic_turns}) == (cat,)
    parsed = parse_messages_body(
        anthropic_body(anthropic_turns),
        DEFAULTS,
        RequestImages(ImageRules(allow_remote=True), fetched),
    )
    assert parsed.generation.messages[0].images[0].image.data == PNG

    gone = refusal(lambda: asyncio.run(fetch_images((f"{picture_site}/gone",), 2**20)))
    assert gone.status == 400 and "answered HTTP 404" in gone.message
    big = refusal(lambda: asyncio.run(fetch_images((f"{picture_site}/big.png",), 2**20)))
    assert (big.status, big.code) == (413, "image_too_large")
    closed = refusal(lambda: asyncio.run(fetch_images(("http://127.0.0.1:9/x.png",), 2**20)))
    assert closed.status == 400 and "could not be fetched" in closed.message
