"""An MLX model folder's prompts counted without its weights (the tokenizer and template only,
as ``serve``'s ``count_tokens`` does): the count is the prompt the MLX backend prefills."""

from __future__ import annotations

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.prompt_counter import PromptCounter
from app.engine.runtime.speculative.generation import prompt_tokens
from tests.runtime.mlx.conftest import MlxDemo


def test_the_count_is_the_prompt_the_mlx_backend_prefills(
    mlx_demo: MlxDemo, four_bit: MlxBackend
) -> None:
    request = GenerationRequest(
        messages=(
            ChatMessage("system", "Be brief."),
            ChatMessage("user", "Tell me about dragons."),
            ChatMessage("assistant", "Dragons are"),
        )
    )
    counter = PromptCounter("mlx", mlx_demo.four_bit)
    try:
        counted = counter.count(request)
    finally:
        counter.close()
    assert counted == len(prompt_tokens(four_bit, request)) > 10
