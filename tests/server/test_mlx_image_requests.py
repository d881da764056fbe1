"""Pictures sent to a running server serving an MLX model folder, with the real ``openai`` and
``anthropic`` clients: the MLX vision demo (``resources/models/demo-vision-mlx``, read through
mlx-vlm) answers an OpenAI ``image_url`` data URL and an Anthropic base64 ``image`` block, greedy
the same both ways, drafting with the model's MTP head after the picture, and a follow-up about the
same picture encodes nothing again."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import anthropic
import openai
import pytest

from app.engine.runtime.core.demo_model import DEMO_VISION_MLX_DIR
from tests.server.server_process import ServerProcess, running_server
from tests.vision.conftest import picture

pytestmark = pytest.mark.slow

MODEL = "demo-vision-mlx"
PNG_BASE64 = base64.b64encode(picture(64, 48)).decode()
QUESTION = "What is in this picture?"


@pytest.fixture(scope="module")
def mlx_vision_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("mlx-vision-serve-home")
    with running_server("--model", str(DEMO_VISION_MLX_DIR), home=home) as process:
        yield process


def test_an_mlx_model_reads_a_picture_through_both_apis(
    mlx_vision_server: ServerProcess,
) -> None:
    client = openai.OpenAI(base_url=mlx_vision_server.base_url, api_key="unused", max_retries=0)
    asked = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_BASE64}"}},
                {"type": "text", "text": QUESTION},
            ],
        }
    ]
    first = client.chat.completions.create(
        model=MODEL, max_tokens=12, temperature=0, messages=asked
    )
    answer = first.choices[0].message.content
    assert answer
    assert first.model_extra["mtp"]["prompt_images_encoded"] == 1
    assert first.model_extra["mtp"]["mode"] != "ar"  # drafted with the head after the picture
    text_only = client.chat.completions.create(
        model=MODEL, max_tokens=2, temperature=0, messages=[{"role": "user", "content": QUESTION}]
    )
    assert first.usage.prompt_tokens >= text_only.usage.prompt_tokens + 8  # the picture's cells
    follow_up = client.chat.completions.create(
        model=MODEL,
        max_tokens=4,
        temperature=0,
        messages=[
            *asked,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "And in one word?"},
        ],
    )
    assert follow_up.model_extra["mtp"]["prompt_images_encoded"] == 0

    anthropic_client = anthropic.Anthropic(
        base_url=mlx_vision_server.root_url, api_key="unused", max_retries=0
    )
    image_block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64},
    }
    reply = anthropic_client.messages.create(
        model=MODEL,
        max_tokens=12,
        extra_body={"temperature": 0},
        messages=[{"role": "user", "content": [image_block, {"type": "text", "text": QUESTION}]}],
    )
    assert reply.content[0].text == answer  # the same picture and question, greedy
    assert reply.model_extra["mtp"]["prompt_images_encoded"] == 1
