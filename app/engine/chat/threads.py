"""The open thread of a conversation tree, with each message's versions.

A conversation's messages form a tree (each names the message it follows, see
:mod:`app.engine.chat.history_schema`): a regenerated reply is a sibling of the reply it
replaced, an edited message a sibling of the original. What the user reads is one path through
it, from the first message to the conversation's ``current_leaf``; each message on the path knows
its siblings (its versions, oldest first), which is what the transcript's ‹ 2/3 › shows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from app.engine.chat.conversation import StoredMessage


def thread_of(messages: list[StoredMessage], leaf: int | None) -> tuple[StoredMessage, ...]:
    """The path from the root to ``leaf`` (the newest message when ``leaf`` is unknown), each
    message with ``versions``: the ids of its siblings and itself, oldest first."""
    if not messages:
        return ()
    by_id = {message.id: message for message in messages}
    siblings: dict[int | None, list[int]] = defaultdict(list)
    for message in messages:
        siblings[message.parent_id].append(message.id)
    current = by_id.get(leaf) if leaf is not None else None
    if current is None:
        current = messages[-1]
    path: list[StoredMessage] = []
    seen: set[int] = set()
    while current is not None and current.id not in seen:  # a cycle would be a damaged file
        seen.add(current.id)
        path.append(replace(current, versions=tuple(sorted(siblings[current.parent_id]))))
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    return tuple(reversed(path))
