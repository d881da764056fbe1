"""Responses kept for ``previous_response_id`` and ``GET /v1/responses/{id}``: bounded in count,
size and time.

Each kept response holds its own new turns (its input without ``instructions``, then its
output) and the id of the response it continued, so a long chain costs memory once per turn,
not once per response; continuing a response walks the chain back. The oldest responses leave
first once more than :data:`MAX_RESPONSES` are kept or their text passes
:data:`MAX_CHARACTERS`, and any response leaves :data:`KEEP_SECONDS` after it was made.
Continuing a response that left (or one of its ancestors) is a 400 that says so. A server
restart forgets them all.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.server.core.api_errors import bad_request
from app.engine.server.core.echo import echo

MAX_RESPONSES = 256
MAX_CHARACTERS = 64 * 2**20
KEEP_SECONDS = 3600.0


@dataclass(frozen=True)
class KeptResponse:
    body: dict[str, Any]
    """The response object, as ``GET /v1/responses/{id}`` returns it."""
    previous_id: str | None
    turns: tuple[ChatMessage, ...]
    called: tuple[tuple[str, str], ...]
    """The calls made in :attr:`turns` (call id, function name)."""
    kept_at: float

    @property
    def characters(self) -> int:
        return sum(
            len(turn.content) + sum(len(c.arguments) for c in turn.tool_calls)
            for turn in self.turns
        )


@dataclass(frozen=True)
class History:
    """The conversation a response continues, oldest turn first."""

    turns: tuple[ChatMessage, ...]
    called: dict[str, str]


class ResponseStore:
    """Kept responses by id (one event loop uses it: no lock)."""

    def __init__(
        self,
        max_responses: int = MAX_RESPONSES,
        max_characters: int = MAX_CHARACTERS,
        keep_seconds: float = KEEP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kept: OrderedDict[str, KeptResponse] = OrderedDict()
        self._max_responses = max_responses
        self._max_characters = max_characters
        self._keep_seconds = keep_seconds
        self._clock = clock
        self._characters = 0

    def keep(
        self,
        response_id: str,
        body: dict[str, Any],
        previous_id: str | None,
        turns: tuple[ChatMessage, ...],
    ) -> None:
        called = tuple((call.id, call.name) for turn in turns for call in turn.tool_calls)
        kept = KeptResponse(body, previous_id, turns, called, self._clock())
        self._kept[response_id] = kept
        self._characters += kept.characters
        self._forget_expired()
        while len(self._kept) > self._max_responses or self._characters > self._max_characters:
            self._drop(next(iter(self._kept)))

    def get(self, response_id: str) -> KeptResponse | None:
        self._forget_expired()
        return self._kept.get(response_id)

    def delete(self, response_id: str) -> bool:
        self._forget_expired()
        if response_id not in self._kept:
            return False
        self._drop(response_id)
        return True

    def history(self, response_id: str) -> History:
        """The turns up to and including ``response_id``'s output; a 400 naming
        ``previous_response_id`` when it (or a response before it) is no longer kept."""
        chain: list[KeptResponse] = []
        wanted: str | None = response_id
        while wanted is not None:
            kept = self.get(wanted)
            if kept is None:
                which = "it" if wanted == response_id else f"the response before it ({wanted})"
                raise bad_request(
                    f"'previous_response_id' {echo(response_id)} cannot be continued: {which} "
                    f"is not kept (this server keeps {self._max_responses} responses for "
                    f"{self._keep_seconds / 60:.0f} minutes, none sent with store: false, and "
                    "none across a restart); send the whole conversation as input instead",
                    "previous_response_id",
                )
            chain.append(kept)
            wanted = kept.previous_id
        chain.reverse()
        return History(
            tuple(turn for kept in chain for turn in kept.turns),
            {call_id: name for kept in chain for call_id, name in kept.called},
        )

    def _forget_expired(self) -> None:
        oldest = self._clock() - self._keep_seconds
        while self._kept and next(iter(self._kept.values())).kept_at < oldest:
            self._drop(next(iter(self._kept)))

    def _drop(self, response_id: str) -> None:
        self._characters -= self._kept.pop(response_id).characters
