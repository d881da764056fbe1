"""Images sent to a running server with the real ``openai`` and ``anthropic`` clients: a model
without a vision projector answers a clear 400 naming why, in each API's error shape; the vision
demo (its projector beside it) is recognised; with --allow-remote-images a server fetches image
URLs (at most --max-images of them); a 100 MB data URL is a 413 and the server keeps serving."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL
from tests.server.server_process import ServerProcess, running_server
from tests.vision.conftest import picture

pytestmark = pytest.mark.slow

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
            model="m", max_tokens=4, messages=[{"role": "user", "content": OPENAI_IMAGE}]
        )
    error = caught.value.body
    assert error["param"] == "messages"
    assert error["message"].startswith(
        "the model demo-mtp has no vision projector (no mmproj-*.gguf beside the model file), so "
        "it cannot read images"
    )
    with pytest.raises(anthropic.BadRequestError) as refused:
        anthropic_client(server).messages.create(
            model="m", max_tokens=4, messages=[{"role": "user", "content": ANTHROPIC_IMAGE}]
        )
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert "has no vision projector" in refused.value.body["error"]["message"]
    text_only = openai_client(server).chat.completions.create(
        model="m", max_tokens=2, messages=[{"role": "user", "content": "Hello"}]
    )
    assert text_only.choices[0].message.content is not None


def test_the_vision_demos_projector_is_found_beside_it(vision_server: ServerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client(vision_server).chat.completions.create(
            model="m", max_tokens=4, messages=[{"role": "user", "content": OPENAI_IMAGE}]
        )
    message = caught.value.body["message"]
    assert "the vision projector mmproj-demo-vision-F16.gguf of demo-vision-Q8_0" in message
    reply = anthropic_client(vision_server).messages.create(
        model="m", max_tokens=4, messages=[{"role": "user", "content": "def add(a, b):"}]
    )
    assert reply.content[0].text  # the vision demo answers text


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
                model="m", max_tokens=4, messages=[{"role": "user", "content": parts}]
            )
        return caught.value.body["message"]

    assert "names 3 image URLs; a request may hold at most 2 images" in ask("/a", "/b", "/c")
    assert "answered HTTP 404" in ask("/gone")
    assert "mmproj-demo-vision-F16.gguf" in ask("/cat.png")  # fetched, read, then phase 1's 400
