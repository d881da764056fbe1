"""A response format that holds the tiny demo model to a long reply: a free story may end after
a few hundred tokens (well under a second on a fast machine), a 20,000-character string field
runs to ``max_tokens``. For tests that need a request still running while they act."""

from __future__ import annotations

LONG_STORY = {
    "type": "object",
    "properties": {"story": {"type": "string", "minLength": 20_000}},
    "required": ["story"],
}
LONG = {"type": "json_schema", "json_schema": {"name": "story", "schema": LONG_STORY}}
