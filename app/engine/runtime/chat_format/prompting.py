"""Chat messages → prompt text with the model's own chat template (``tokenizer.chat_template``).

A model answers well only in the turn format it was trained on, and that format ships inside the
GGUF as a Jinja template (the Hugging Face convention). It is rendered here in a sandbox, with
the variables templates expect (``messages``, ``add_generation_prompt``, ``bos_token``,
``eos_token``, ``raise_exception``, ``strftime_now``, and ``tools`` when the request offers
tools). A model without a template gets the plain text of its messages, with a note.

Images stand in a message's text at character offsets (:class:`PlacedImage`); the text itself holds
no trace of them, so nothing a user types can pose as an image. Rendering for a model with a
vision projector writes the projector's marker at each image's place (``image_marker``), which
keeps every template working — templates only see strings — and lets llama.cpp's multimodal
library put the model's own image tokens there; for a model without one, an image is refused with
the reason, never dropped.

Tool turns (an assistant message with ``tool_calls``, ``tool`` result messages) go to a template
that handles tools as Hugging Face passes them. A template that never mentions tools (the demo
model's) gets them in the Hermes/Qwen convention instead: the tools described in a system note,
calls written as ``<tool_call>`` blocks in the assistant's text, results as ``<tool_response>``
blocks in a user turn.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.errors import ImageError, RuntimeBackendError
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.chat_format.tools import CALL_CLOSE, CALL_OPEN, ToolCall, ToolSpec

TOOLS_NOTE = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


@dataclass(frozen=True)
class PlacedImage:
    """An image standing in a message's text before the character at ``offset``."""

    offset: int
    image: ImagePart


@dataclass(frozen=True)
class ChatMessage:
    """One turn. An assistant turn may carry ``tool_calls``; a ``tool`` turn answers the call
    ``tool_call_id`` (of the function ``name``). ``images``: pictures in the text, by offset
    (ascending; several may share one)."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    images: tuple[PlacedImage, ...] = ()

    def __post_init__(self) -> None:
        offsets = [placed.offset for placed in self.images]
        if offsets != sorted(offsets) or any(not 0 <= o <= len(self.content) for o in offsets):
            raise ValueError(f"image offsets {offsets} do not fit a text of {len(self.content)}")

    def text_with(self, marker: str) -> str:
        """The text with ``marker`` written at each image's place."""
        pieces, start = [], 0
        for placed in self.images:
            pieces += [self.content[start : placed.offset], marker]
            start = placed.offset
        return "".join([*pieces, self.content[start:]])

    def moved(self, role: str, content: str, shift: int) -> ChatMessage:
        """A plain ``role`` turn of ``content``, which holds this turn's text from ``shift``
        on: this turn's images move with their text."""
        images = tuple(PlacedImage(p.offset + shift, p.image) for p in self.images)
        return ChatMessage(role, content, images=images)


def images_of(messages: Sequence[ChatMessage]) -> tuple[ImagePart, ...]:
    """Every image of the conversation, in the order a rendered prompt shows them."""
    return tuple(placed.image for message in messages for placed in message.images)


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.TemplateError(message)


def _strftime_now(format_string: str) -> str:
    return datetime.now().strftime(format_string)


def _tojson(
    value: object, indent: int | None = None, separators: tuple[str, str] | None = None
) -> str:
    """Hugging Face's ``tojson``: keys in their given order, non-ASCII text kept (Jinja's own
    sorts keys, which is not the order tool schemas were trained in)."""
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)


@functools.lru_cache(maxsize=4)
def _compiled(template: str) -> jinja2.Template:
    """Compiling a large template takes milliseconds; a chat renders the same one every turn."""
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    environment.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    environment.filters["tojson"] = _tojson
    return environment.from_string(template)


def render_chat(
    template: str | None,
    messages: Sequence[ChatMessage],
    *,
    special_tokens: dict[str, str],
    model_name: str,
    add_generation_prompt: bool = True,
    tools: Sequence[ToolSpec] = (),
    image_marker: str | None = None,
    variables: Mapping[str, str] | None = None,
) -> str:
    """The prompt text for ``messages``, followed by the assistant turn's opening unless
    ``add_generation_prompt`` is False; ``tools`` are offered to the model; each image is
    written as ``image_marker`` (a model without a vision projector has none: images are
    refused); ``variables`` are given to the template beside them (``reasoning_effort``)."""
    if image_marker is None and images_of(messages):
        raise ImageError(
            f"{model_name} has no vision projector (an mmproj-*.gguf file beside the model), so "
            "it cannot read images: send text only, or load a vision model with its projector"
        )
    if template is None or not handles_tools(template):
        messages = hermes_messages(messages, tools)
        tools = ()
    marker = image_marker or ""
    if template is None:
        return "\n".join(message.text_with(marker) for message in messages)
    extra = {"tools": [tool.as_template_value() for tool in tools]} if tools else {}
    try:
        return _compiled(template).render(
            messages=[_template_value(message, marker) for message in messages],
            add_generation_prompt=add_generation_prompt,
            **special_tokens,
            **extra,
            **(variables or {}),
        )
    except jinja2.TemplateError as exc:
        raise RuntimeBackendError(
            f"the chat template in {model_name} (tokenizer.chat_template) failed: {exc}; "
            "fix the template in the GGUF or send a raw prompt instead of chat messages"
        ) from exc


def handles_tools(template: str) -> bool:
    """True when the template renders tools and tool turns itself."""
    return "tools" in template and "tool_calls" in template


def _template_value(message: ChatMessage, image_marker: str) -> dict[str, object]:
    value: dict[str, object] = {"role": message.role, "content": message.text_with(image_marker)}
    if message.tool_calls:
        value["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _json_or_text(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        value["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        value["name"] = message.name
    return value


def _json_or_text(arguments: str) -> object:
    """Templates write ``arguments | tojson``: they want the object, as Hugging Face passes it."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def hermes_messages(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> list[ChatMessage]:
    """Tool turns as plain text turns in the Hermes/Qwen convention, for a template that has
    no tool support; ``tools`` become a system note (joined to the first system message).
    Images keep their places in the rewritten texts."""
    plain: list[ChatMessage] = []
    for message in messages:
        if message.role == "tool":
            opening = "<tool_response>\n"
            response = f"{opening}{message.content}\n</tool_response>"
            before = plain[-1] if plain else None
            if before and before.role == "user" and before.content.endswith("</tool_response>"):
                joined = message.moved(
                    "user", f"{before.content}\n{response}", len(before.content) + 1 + len(opening)
                )
                plain[-1] = ChatMessage(
                    "user", joined.content, images=before.images + joined.images
                )
            else:
                plain.append(message.moved("user", response, len(opening)))
        elif message.tool_calls:
            blocks = [
                f'{CALL_OPEN}\n{{"name": {json.dumps(call.name)}, "arguments": '
                f"{call.arguments}}}\n{CALL_CLOSE}"
                for call in message.tool_calls
            ]
            text = "\n".join([message.content, *blocks] if message.content else blocks)
            plain.append(message.moved(message.role, text, 0))
        else:
            plain.append(message.moved(message.role, message.content, 0))
    if tools:
        note = TOOLS_NOTE.format(
            tools="\n".join(json.dumps(tool.as_template_value()) for tool in tools)
        )
        if plain and plain[0].role == "system":
            plain[0] = plain[0].moved("system", f"{plain[0].content}\n\n{note}", 0)
        else:
            plain.insert(0, ChatMessage("system", note))
    return plain
