"""Images sent to a running server with the real ``openai`` and ``anthropic`` clients: the vision
demo (its projector found beside it) answers about a picture through both APIs, in user turns and
inside an Anthropic ``tool_result``, with MTP drafting on, and a follow-up about the same picture
encodes nothing again; a model without a vision projector answers a clear 400 naming why, in
each API's error shape; with --allow-remote-images a server fetches image URLs (at most
--max-images of them); a 100 MB data URL is a 413 and the server keeps serving."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from app.engine.remote.client import RemoteEndpoint
from app.engine.runtime.chat_format.images import ImageLimits, read_image
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL
from app.engine.runtime.sampling.sampler import SamplerSettings
from tests.server.server_process import ServerProcess, running_server
from tests.vision.conftest import picture

pytestmark = pytest.mark.slow

DEMO = "demo-mtp"
VISION = "demo-vision-Q8_0"
PNG_BASE64 = base64.b64encode(picture(64, 48)).decode()
OPENAI_IMAGE = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_BASE64}"}},
]
ANTHROPIC_IMAGE = [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}},
    {"type": "text", "text": "What is in this picture?"},
]


@pytest.fixture(scope="module")
def vision_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("vision-serve-home")
    args = ("--model", str(DEMO_VISION_MODEL), "--allow-remote-images", "--max-images", "2")
    with running_server(*args, home=home) as process:
        yield process


def openai_client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


def anthropic_client(server: ServerProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.root_url, api_key="unused", max_retries=0)


def test_a_model_without_a_projector_says_so_to_both_apis(server: ServerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(server).chat.completions.create(
            model=DEMO, max_tokens=4, messages=[{"role": "user", "content": OPENAI_IMAGE}]
        )
    error = caught.value.body
    assert error["param"] == "messages"
    assert error["message"].startswith(
        "demo-mtp.gguf has no vision projector (no mmproj-*.gguf beside the model file), so "
        "it cannot read images"
    )
    assert "\n" not in error["message"]
    with pytest.raises(anthropic.BadRequestError) as refused:
        anthropic_client(server).messages.create(
            model=DEMO, max_tokens=4, messages=[{"role": "user", "content": ANTHROPIC_IMAGE}]
        )
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert "has no vision projector" in refused.value.body["error"]["message"]
    text_only = openai_client(server).chat.completions.create(
        model=DEMO, max_tokens=2, messages=[{"role": "user", "content": "Hello"}]
    )
    assert text_only.choices[0].message.content is not None


def test_the_vision_demo_answers_about_a_picture_through_the_openai_api(
    vision_server: ServerProcess,
) -> None:
    client = openai_client(vision_server)
    asked = [{"role": "user", "content": OPENAI_IMAGE}]
    first = client.chat.completions.create(
        model=VISION, max_tokens=24, temperature=0, messages=asked
    )
    answer = first.choices[0].message.content
    assert answer
    plain = client.chat.completions.create(
        model=VISION, max_tokens=24, temperature=0, messages=asked, extra_body={"mtp_depth": 0}
    )
    assert plain.choices[0].message.content == answer  # drafting changes nothing
    follow_up = client.chat.completions.create(
        model=VISION,
        max_tokens=8,
        temperature=0,
        messages=[
            *asked,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "And in one word?"},
        ],
        extra_body={"mtp_depth": 0},
    )
    mtp = follow_up.model_extra["mtp"]  # it follows the plain request about the same picture
    assert mtp["prompt_images_encoded"] == 0 and mtp["prompt_reused_tokens"] > 0
    text_only = client.chat.completions.create(
        model=VISION,
        max_tokens=24,
        temperature=0,
        messages=[{"role": "user", "content": "What is in this picture?"}],
    )
    # the picture is read: encoded once, its cells in the prompt (at least the projector's 8)
    assert first.model_extra["mtp"]["prompt_images_encoded"] == 1
    assert first.usage.prompt_tokens >= text_only.usage.prompt_tokens + 8


def test_the_vision_demo_answers_about_a_picture_through_the_anthropic_api(
    vision_server: ServerProcess,
) -> None:
    client = anthropic_client(vision_server)
    reply = client.messages.create(
        model=VISION,
        max_tokens=16,
        messages=[{"role": "user", "content": ANTHROPIC_IMAGE}],
    )
    assert reply.content[0].text
    assert reply.model_extra["mtp"]["prompt_images_encoded"] == 1
    tool_turns = [
        {"role": "user", "content": "Take a photo."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "camera", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": ANTHROPIC_IMAGE[:1]},
                {"type": "text", "text": "What does it show?"},
            ],
        },
    ]
    tools = [{"name": "camera", "description": "takes a photo", "input_schema": {"type": "object"}}]
    answered = client.messages.create(model=VISION, max_tokens=16, messages=tool_turns, tools=tools)
    assert answered.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert answered.content
    assert answered.model_extra["mtp"]["prompt_images_encoded"] == 1  # the tool's picture


def test_a_100_mb_data_url_is_a_413_and_the_server_keeps_serving(server: ServerProcess) -> None:
    huge = "data:image/png;base64," + "A" * (100 * 2**20)
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": huge}}]}
        ]
    }
    refused = httpx2.post(f"{server.base_url}/chat/completions", json=body, timeout=60)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "request_too_large"
    ok = httpx2.post(
        f"{server.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
        timeout=60,
    )
    assert ok.status_code == 200


def test_remote_image_urls_are_fetched_only_up_to_the_image_limit(
    vision_server: ServerProcess, picture_site: str
) -> None:
    client = openai_client(vision_server)

    def ask(*paths: str) -> str:
        parts = [{"type": "image_url", "image_url": {"url": f"{picture_site}{p}"}} for p in paths]
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=VISION, max_tokens=4, messages=[{"role": "user", "content": parts}]
            )
        return caught.value.body["message"]

    assert "names 3 image URLs; a request may hold at most 2 images" in ask("/a", "/b", "/c")
    assert "answered HTTP 404" in ask("/gone")
    fetched = client.chat.completions.create(
        model=VISION,
        max_tokens=4,
        messages=[
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": f"{picture_site}/cat.png"}}],
            }
        ],
    )
    assert fetched.model_extra["mtp"]["prompt_images_encoded"] == 1


def test_a_remote_chat_sends_its_pictures_to_the_server(vision_server: ServerProcess) -> None:
    """``chat --endpoint`` (and the chat page's remote connection) pass pictures on as
    ``image_url`` parts: the server counts the picture's cells in the prompt."""
    shown = read_image(picture(64, 48), ImageLimits(), "picture")
    with RemoteEndpoint(vision_server.base_url) as endpoint:
        asked = [ChatMessage("user", "What is in this picture?", images=(PlacedImage(0, shown),))]
        with_picture = endpoint.chat(asked, SamplerSettings(temperature=0), 4).wait()
        alone = endpoint.chat(
            [ChatMessage("user", "What is in this picture?")], SamplerSettings(temperature=0), 4
        ).wait()
    assert with_picture.text
    assert with_picture.prompt_tokens >= alone.prompt_tokens + 8
