"""A request's prompt as token ids: what the worker prefills and what ``count_tokens`` counts.

One definition for both, so a count is the prompt the model will see: the chat template applied
to the messages (tools offered unless the request turns them off, the request's template
variables), a last assistant message continued rather than closed, an image standing as the
cells it fills, BOS added where the model wants one. It needs only the model's text side
(:class:`PromptText`), which a loaded backend has and which a vocabulary loaded without weights
has too (``process/prompt_counter.py``; it reads no images).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.engine.errors import ImageError
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.chat_format.prompting import ChatMessage, images_of, render_chat
from app.engine.runtime.chat_format.tools import NONE, ToolSpec
from app.engine.runtime.core.request import GenerationRequest


class PromptText(Protocol):
    """What rendering and tokenizing a prompt needs of a model (a :class:`DecodeBackend` has
    it)."""

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]: ...

    @property
    def chat_template(self) -> str | None: ...

    @property
    def special_token_texts(self) -> dict[str, str]: ...

    @property
    def bos_token_id(self) -> int | None: ...

    @property
    def image_marker(self) -> str | None: ...

    def tokenize_with_images(self, text: str, images: Sequence[ImagePart]) -> list[int]: ...


def offered_tools(request: GenerationRequest) -> tuple[ToolSpec, ...]:
    """The tools shown to the model: none when the request says it must not call any."""
    return () if request.tool_choice.mode == NONE else request.tools


def continued_message(text: PromptText, messages: Sequence[ChatMessage]) -> ChatMessage | None:
    """The last message when the reply continues it (an assistant turn without calls, under a
    chat template), else None."""
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return None
    return last if text.chat_template is not None else None


def prompt_text(
    text: PromptText,
    request: GenerationRequest,
    model_name: str,
    messages: Sequence[ChatMessage] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt as text: the raw prompt, or ``messages`` (the request's by default) through
    the chat template — opening the assistant's turn, or continuing the last message when it is
    the assistant's."""
    if messages is None and not request.messages:
        return request.prompt or ""
    messages = request.messages if messages is None else messages
    continued = continued_message(text, messages) if add_generation_prompt else None
    marker = text.image_marker
    rendered = render_chat(
        text.chat_template,
        messages[:-1] if continued is not None else messages,
        special_tokens=text.special_token_texts,
        model_name=model_name,
        add_generation_prompt=add_generation_prompt,
        tools=offered_tools(request),
        image_marker=marker,
        variables=dict(request.template_variables),
    )
    return rendered + continued.text_with(marker or "") if continued is not None else rendered


def prompt_token_ids(
    text: PromptText,
    request: GenerationRequest,
    model_name: str,
    messages: Sequence[ChatMessage] | None = None,
    *,
    add_generation_prompt: bool = True,
    no_images_reason: str | None = None,
) -> list[int]:
    """The prompt's token ids (control tokens in a chat template's text read as such, plain
    text in a raw prompt), each image as the cells it fills, BOS first when the model wants
    one; ``no_images_reason`` says why a model that reads no images refuses them."""
    shown = request.messages if messages is None else messages
    images = images_of(shown)
    if images and text.image_marker is None:
        raise ImageError(no_images_reason or f"{model_name} cannot read images: send text only")
    rendered = prompt_text(
        text, request, model_name, messages, add_generation_prompt=add_generation_prompt
    )
    if images:
        return text.tokenize_with_images(rendered, images)
    tokens = text.tokenize(rendered, parse_special=bool(shown))
    bos = text.bos_token_id
    if bos is not None and (not tokens or tokens[0] != bos):
        tokens.insert(0, bos)
    return tokens
