"""What a conversation is: its settings, its messages, and the request its next reply needs.

A conversation keeps its own system prompt and sampling settings (so reopening it next week
replays it the same way), and every assistant message keeps the statistics and stop reason of the
generation that wrote it. Turning the stored messages into a :class:`GenerationRequest` happens
here, once, so regenerate, edit-and-resend and compare mode all send the same context.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH, GenerationRequest
from app.engine.runtime.core.stats import TUPLE_FIELDS, DecodeStats
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH

USER = "user"
ASSISTANT = "assistant"
SYSTEM = "system"
TITLE_LENGTH = 48


class MessageState(StrEnum):
    """Where a message stands. A reply is ``streaming`` while tokens arrive."""

    COMPLETE = "complete"
    STREAMING = "streaming"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class ChatSettings:
    """A conversation's system prompt, sampling settings and MTP choice (CLI defaults)."""

    system_prompt: str = ""
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    min_p: float = 0.0
    seed: int | None = None
    max_tokens: int = 512
    mtp_enabled: bool = True
    mtp_depth: int | str = DEFAULT_MTP_DEPTH  # 1..MAX_DRAFT_DEPTH, or "auto"
    accept: str = AcceptMode.LEVIATHAN_CHEN.value
    drop_oldest_turns: bool = True
    """When the conversation no longer fits the context, leave out its oldest turns (said in
    the reply's note) instead of failing."""

    @property
    def effective_depth(self) -> int:
        """The request's depth: the fixed one, or the adaptive depth's maximum; 0 = plain."""
        if not self.mtp_enabled:
            return 0
        return _request_depth(self.mtp_depth)

    def sampler(self, seed: int | None = None) -> SamplerSettings:
        """The runtime's sampler for these settings (``seed`` overrides the stored one)."""
        return SamplerSettings(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
            seed=self.seed if seed is None else seed,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ChatSettings:
        """Settings from stored JSON; unknown keys (a newer app's) are ignored, and so is a
        value of the wrong type (the default is kept)."""
        defaults = cls()
        settings = cls(
            **{
                f.name: raw[f.name]
                for f in fields(cls)
                if f.name in raw and _same_kind(raw[f.name], getattr(defaults, f.name), f.name)
            }
        )
        if settings.mtp_depth == AUTO:
            return settings
        if not isinstance(settings.mtp_depth, int):
            return replace(settings, mtp_depth=DEFAULT_MTP_DEPTH)
        return replace(settings, mtp_depth=min(max(settings.mtp_depth, 1), MAX_DRAFT_DEPTH))


def _same_kind(value: Any, default: Any, name: str) -> bool:
    """Whether a stored ``value`` can stand where ``default`` does (``seed`` may be None, a
    float field takes a whole number, ``mtp_depth`` a number or "auto")."""
    if name == "seed":
        return value is None or (isinstance(value, int) and not isinstance(value, bool))
    if name == "mtp_depth":
        return value == AUTO or (isinstance(value, int) and not isinstance(value, bool))
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, type(default))


def _request_depth(choice: int | str) -> int:
    """A request's ``mtp_depth`` for a depth setting: "auto" drafts up to AUTO_MAX_DEPTH."""
    return AUTO_MAX_DEPTH if choice == AUTO else int(choice)


@dataclass(frozen=True)
class StoredMessage:
    """One message as stored. Assistant messages carry their generation's figures."""

    id: int
    conversation_id: int
    role: str
    content: str
    state: MessageState
    created_at: float
    model: str = ""
    finish_reason: str = ""
    stats: DecodeStats | None = None
    seed: int | None = None
    """The sampling seed of the reply, so it can be reproduced."""
    note: str = ""
    error: str = ""
    parent_id: int | None = None
    """The message this one follows (None: the first of its conversation)."""
    versions: tuple[int, ...] = ()
    """This message and its siblings (its other versions), oldest first; filled when the
    message is read as part of a thread."""

    images: tuple[PlacedImage, ...] = ()
    """Pictures in a user message's text, by character offset."""

    @property
    def version(self) -> int:
        """Which version this is, from 1 (1 when it has no siblings)."""
        return self.versions.index(self.id) + 1 if self.id in self.versions else 1


@dataclass(frozen=True)
class ConversationSummary:
    """A row of the conversations list."""

    id: int
    title: str
    created_at: float
    updated_at: float
    message_count: int


@dataclass(frozen=True)
class Conversation:
    summary: ConversationSummary
    settings: ChatSettings
    messages: tuple[StoredMessage, ...]

    @property
    def id(self) -> int:
        return self.summary.id

    @property
    def title(self) -> str:
        return self.summary.title


def context_in_use(messages: tuple[StoredMessage, ...]) -> int | None:
    """Tokens of the context the conversation filled at its last reply (its prompt and its
    text), None before a reply with figures."""
    for message in reversed(messages):
        if message.role == ASSISTANT and message.stats is not None:
            return message.stats.prompt_tokens + message.stats.generated_tokens
    return None


def title_from(text: str) -> str:
    """A short title for a conversation from its first message, the way a person would name it:
    its first sentence without greetings and "can you", without an opening "write a" or
    "explain", at most :data:`TITLE_WORDS` words ("Write a Python function that reverses a
    string." → "Python function that reverses a string"). Instant, so it never waits on a model."""
    sentence = _first_sentence(text)
    words = _without_openers(sentence.split())
    if not words:
        return "New conversation"
    title = " ".join(words[:TITLE_WORDS]).rstrip(",;:-–—.!?")
    title = title[0].upper() + title[1:]
    return title if len(title) <= TITLE_LENGTH else title[: TITLE_LENGTH - 1].rstrip() + "…"


TITLE_WORDS = 6
_GREETINGS = {"hi", "hello", "hey", "please", "pls", "ok", "okay", "so"}
_POLITE = {"please", "pls"}
"""Left out wherever they open a request; a greeting only when a comma or ! ends it ("Hi,
can you …"), since "Hello from Home" is a subject of its own."""
_ASKING = (
    ("can", "you"),
    ("could", "you"),
    ("would", "you"),
    ("will", "you"),
    ("i", "want", "you", "to"),
    ("i'd", "like", "you", "to"),
    ("help", "me"),
    ("i", "need"),
)
_MAKING = {"write", "create", "make", "generate", "give", "show", "build", "implement", "draft"}
_ARTICLES = {"a", "an", "the", "some", "me"}
_EXPLAINING = {"explain", "tell", "describe"}
_QUESTION_WORDS = {"how", "what", "why", "when", "where", "which", "who", "me"}


def _first_sentence(text: str) -> str:
    """The first sentence that is more than a greeting."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = line.lstrip("#>*-` ").replace("`", "").replace("**", "")
    start = 0
    for index, character in enumerate(line):
        if character in ".?!" and (index + 1 == len(line) or line[index + 1] == " "):
            sentence = line[start:index].strip()
            if not {word.lower().strip(",") for word in sentence.split()} <= _GREETINGS:
                return sentence
            start = index + 1
    return line[start:].strip() or line


def _without_openers(words: list[str]) -> list[str]:
    """Drop what opens a request without naming its subject."""
    changed = True
    while words and changed:
        changed = False
        first = words[0].lower().strip(",!")
        lowered = [word.lower().strip(",") for word in words]
        asking = next((p for p in _ASKING if tuple(lowered[: len(p)]) == p), None)
        greeting = first in _POLITE or (first in _GREETINGS and words[0][-1] in ",!")
        if greeting and len(words) > 1:
            words, changed = words[1:], True
        elif asking is not None and len(words) > len(asking):
            words, changed = words[len(asking) :], True
        elif first in _MAKING and len(words) > 2 and lowered[1] in _ARTICLES:
            rest = words[2:] if lowered[1] != "me" or lowered[2] not in _ARTICLES else words[3:]
            words, changed = rest or words, bool(rest)
        elif first in _EXPLAINING and len(words) > 2 and lowered[1] in _QUESTION_WORDS:
            skip = 2 if lowered[1] == "me" else 1
            if lowered[1] == "me" and len(words) > 3 and lowered[2] == "about":
                skip = 3
            words, changed = words[skip:], True
    return words


def chat_context(
    settings: ChatSettings, messages: tuple[StoredMessage, ...]
) -> tuple[ChatMessage, ...]:
    """The messages a reply is conditioned on: the system prompt, then every user message and
    every assistant reply that has text (a failed or stopped reply's partial text included); a
    user message's pictures go with it."""
    context = [ChatMessage(SYSTEM, settings.system_prompt)] if settings.system_prompt else []
    for message in messages:
        if message.role == USER or (message.role == ASSISTANT and message.content):
            context.append(ChatMessage(message.role, message.content, images=message.images))
    return tuple(context)


def reply_request(
    settings: ChatSettings,
    messages: tuple[StoredMessage, ...],
    *,
    mtp_depth: int | str | None = None,
    seed: int | None = None,
) -> GenerationRequest:
    """The request for the assistant reply that follows ``messages``; ``mtp_depth`` (a depth,
    0 for plain decoding, or "auto") overrides the settings' MTP choice."""
    if mtp_depth is None:
        adaptive = settings.mtp_enabled and settings.mtp_depth == AUTO
        depth = settings.effective_depth
    else:
        adaptive, depth = mtp_depth == AUTO, _request_depth(mtp_depth)
    return GenerationRequest(
        messages=chat_context(settings, messages),
        max_tokens=settings.max_tokens,
        sampler=settings.sampler(seed),
        mtp_depth=depth,
        adaptive_depth=adaptive,
        accept=AcceptMode(settings.accept),
        trim_history=settings.drop_oldest_turns,
    )


def stats_to_json(stats: DecodeStats) -> dict[str, Any]:
    """The recorded fields of ``stats`` (derived figures are recomputed on load)."""
    data = asdict(stats)
    for name in TUPLE_FIELDS:
        data[name] = list(getattr(stats, name))
    return data


def stats_from_json(raw: dict[str, Any]) -> DecodeStats:
    """Stored statistics; fields a newer app wrote are ignored, older ones take defaults."""
    known = {f.name for f in fields(DecodeStats)}
    values = {key: value for key, value in raw.items() if key in known}
    for name in TUPLE_FIELDS:
        values[name] = tuple(values.get(name, ()))
    return DecodeStats(**values)
