"""Chat messages rendered with a model's Jinja chat template."""

from __future__ import annotations

import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.prompting import ChatMessage, render_chat
from tests.runtime.tiny_model import CHATML_TEMPLATE

MESSAGES = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hi"))
SPECIAL = {"bos_token": "", "eos_token": "<|im_end|>"}


def test_the_template_renders_every_turn_and_opens_the_answer() -> None:
    text = render_chat(CHATML_TEMPLATE, MESSAGES, special_tokens=SPECIAL, model_name="m.gguf")
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_template_errors_name_the_model_and_the_way_out() -> None:
    refusing = "{{ raise_exception('System role not supported') }}"
    with pytest.raises(RuntimeBackendError, match=r"m\.gguf .*System role not supported.*raw"):
        render_chat(refusing, MESSAGES, special_tokens=SPECIAL, model_name="m.gguf")
    with pytest.raises(RuntimeBackendError, match=r"chat template in m\.gguf"):
        render_chat("{% for %}", MESSAGES, special_tokens=SPECIAL, model_name="m.gguf")


def test_a_model_without_a_template_gets_the_plain_messages() -> None:
    assert render_chat(None, MESSAGES, special_tokens=SPECIAL, model_name="m.gguf") == (
        "Be brief.\nHi"
    )
