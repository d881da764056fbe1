"""Chat messages → prompt text with the model's own chat template (``tokenizer.chat_template``).

A model answers well only in the turn format it was trained on, and that format ships inside the
GGUF as a Jinja template (the Hugging Face convention). It is rendered here in a sandbox, with
the variables templates expect (``messages``, ``add_generation_prompt``, ``bos_token``,
``eos_token``, ``raise_exception``, ``strftime_now``). A model without a template gets the plain
text of its messages, with a note.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.errors import RuntimeBackendError


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.TemplateError(message)


def _strftime_now(format_string: str) -> str:
    return datetime.now().strftime(format_string)


@functools.lru_cache(maxsize=4)
def _compiled(template: str) -> jinja2.Template:
    """Compiling a large template takes milliseconds; a chat renders the same one every turn."""
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    environment.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    return environment.from_string(template)


def render_chat(
    template: str | None,
    messages: Sequence[ChatMessage],
    *,
    special_tokens: dict[str, str],
    model_name: str,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text for ``messages``, followed by the assistant turn's opening unless
    ``add_generation_prompt`` is False."""
    if template is None:
        return "\n".join(message.content for message in messages)
    try:
        return _compiled(template).render(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=add_generation_prompt,
            **special_tokens,
        )
    except jinja2.TemplateError as exc:
        raise RuntimeBackendError(
            f"the chat template in {model_name} (tokenizer.chat_template) failed: {exc}; "
            "fix the template in the GGUF or send a raw prompt instead of chat messages"
        ) from exc
