"""A request's prompt counted in the server's own process before it queues.

The count (:class:`PromptCounter`: the tokenizer and chat template without the weights) takes
milliseconds and no worker time, so ``count_tokens`` answers at once even while a long reply is
generating, and a prompt that cannot fit the context is refused before it waits in the queue —
in the words each API's clients look for: OpenAI's ``context_length_exceeded``, Anthropic's
"prompt is too long: N tokens > M maximum" (Claude Code compacts its conversation on it). A
template variable the request sets (``reasoning_effort``) must be one the model's chat template
reads, or the field that set it is refused.
"""

from __future__ import annotations

import asyncio

from app.engine.errors import MtpStudioError
from app.engine.runtime.chat_format.prompting import images_of
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.prompt_counter import PromptCounter
from app.engine.server.core.api_errors import ApiError, bad_request, unsupported
from app.engine.server.core.echo import clean
from app.engine.server.core.request_fields import RUNTIME_MESSAGE_CHARACTERS, ParsedRequest


class PromptCheck:
    """Counts prompts for a model whose context holds ``context_length`` tokens."""

    def __init__(self, counter: PromptCounter, context_length: int, model_name: str) -> None:
        self._counter = counter
        self.context_length = context_length
        self._model_name = model_name

    async def count(self, generation: GenerationRequest) -> int:
        """The prompt tokens the worker would prefill (a bad template is a 400 here)."""
        try:
            return await asyncio.to_thread(self._counter.count, generation)
        except MtpStudioError as exc:  # a template that fails, an image it cannot take
            if self._counter.closed:  # the model was unloaded meanwhile: not the request's fault
                raise ApiError(
                    503,
                    f"{self._model_name} was unloaded while the prompt was counted; retry the "
                    "request",
                    type_="server_error",
                    headers={"Retry-After": "1"},
                ) from None
            raise bad_request(clean(str(exc), RUNTIME_MESSAGE_CHARACTERS)) from None

    async def check_fits(self, parsed: ParsedRequest) -> None:
        """400 unless the prompt fits the context with room for a reply (or the request lets
        the worker leave its oldest turns out until it does). A prompt with images is the
        worker's to measure: their cells need the model's projector."""
        self._check_template_variables(parsed)
        if images_of(parsed.generation.messages):
            return
        tokens = await self.count(parsed.generation)
        maximum = self.context_length - 1
        if tokens > maximum and not parsed.generation.trim_history:
            raise ApiError(
                400,
                f"This model's maximum context length is {self.context_length} tokens, but the "
                f"prompt is {tokens} tokens (the context window of {self._model_name}); shorten "
                "the conversation, or start the server with a larger --ctx",
                code="context_length_exceeded",
                param=parsed.prompt_field,
                anthropic_message=f"prompt is too long: {tokens} tokens > {maximum} maximum",
            )

    def _check_template_variables(self, parsed: ParsedRequest) -> None:
        template = self._counter.chat_template or ""
        fields = dict(parsed.template_fields)
        for variable, value in parsed.generation.template_variables:
            if variable not in template:
                field = fields.get(variable, variable)
                raise unsupported(
                    field,
                    value,
                    f"the chat template of {self._model_name} has no {variable} setting",
                )
