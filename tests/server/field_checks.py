"""The endpoints whose request fields docs/server-api.md#request-fields lists, and a way to call
each one with extra fields over raw HTTP (no SDK between the test and the server, so a field
reaches the server exactly as written).

:class:`Endpoint` knows each API's minimal body, where its reply's text and MTP statistics are,
and how it names a field in an error (OpenAI's ``param``, or the field quoted in Anthropic's
message).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2

from app.engine.server.anthropic.field_table import COUNT_TOKENS_FIELDS, MESSAGES_FIELDS
from app.engine.server.core.field_rules import RUNTIME_PENDING, FieldRule, FieldTable
from app.engine.server.openai.field_table import CHAT_FIELDS, COMPLETION_FIELDS
from app.engine.server.responses.field_table import RESPONSES_FIELDS
from tests.server.server_process import ServerProcess

QUESTION = "Tell me about dragons."
GREEDY = {"temperature": 0}


@dataclass(frozen=True)
class Endpoint:
    key: str
    title: str
    table: FieldTable
    path: str
    base: dict[str, Any]
    length_field: str | None = "max_tokens"
    anthropic: bool = False
    aliases: dict[str, str] = field(default_factory=dict)
    """A field of the shared checks → the name this endpoint gives it (``stop`` →
    ``stop_sequences``)."""

    def post(self, server: ServerProcess, **fields: Any) -> httpx2.Response:
        body = {**self.base, **fields}
        return httpx2.post(f"{server.root_url}{self.path}", json=body, timeout=120)

    def reply(self, server: ServerProcess, **fields: Any) -> dict[str, Any]:
        """The reply to the base body with ``fields`` (greedy unless they say otherwise)."""
        greedy = GREEDY if self.length_field is not None else {}  # count_tokens has no sampling
        answer = self.post(server, **{**greedy, **fields})
        assert answer.status_code == 200, answer.text
        return answer.json()

    def text(self, reply: dict[str, Any]) -> str:
        if self.key == "chat":
            return reply["choices"][0]["message"]["content"] or ""
        if self.key == "completions":
            return reply["choices"][0]["text"]
        if self.key == "responses":
            return "".join(
                part["text"]
                for item in reply["output"]
                if item["type"] == "message"
                for part in item["content"]
            )
        return "".join(block.get("text", "") for block in reply["content"])

    def say(self, server: ServerProcess, **fields: Any) -> str:
        return self.text(self.reply(server, **fields))

    def named(self, name: str) -> str:
        return self.aliases.get(name, name)

    def refusal(self, answer: httpx2.Response) -> tuple[str | None, str]:
        """The field a 400 names (OpenAI's ``param``; None on Anthropic's API) and its
        message."""
        error = answer.json()["error"]
        return error.get("param"), error["message"]


USER = [{"role": "user", "content": QUESTION}]
CLAUDE = "claude-code-local"
"""A name Claude Code sends: the shared server answers it (``--alias 'claude-*'``)."""
CHAT = Endpoint("chat", "Chat completions: `POST /v1/chat/completions`", CHAT_FIELDS,
                "/v1/chat/completions", {"messages": USER, "max_tokens": 12})  # fmt: skip
COMPLETIONS = Endpoint("completions", "Text completions: `POST /v1/completions`",
                       COMPLETION_FIELDS, "/v1/completions",
                       {"prompt": "Once upon a time", "max_tokens": 12})  # fmt: skip
RESPONSES = Endpoint("responses", "Responses: `POST /v1/responses`", RESPONSES_FIELDS,
                     "/v1/responses", {"input": QUESTION, "max_output_tokens": 12},
                     length_field="max_output_tokens")  # fmt: skip
MESSAGES = Endpoint("messages", "Messages: `POST /v1/messages`", MESSAGES_FIELDS, "/v1/messages",
                    {"model": CLAUDE, "messages": USER, "max_tokens": 12}, anthropic=True,
                    aliases={"stop": "stop_sequences"})  # fmt: skip
COUNT_TOKENS = Endpoint("count_tokens", "Token counts: `POST /v1/messages/count_tokens`",
                        COUNT_TOKENS_FIELDS, "/v1/messages/count_tokens",
                        {"model": CLAUDE, "messages": USER}, length_field=None,
                        anthropic=True)  # fmt: skip
ENDPOINTS = (CHAT, COMPLETIONS, RESPONSES, MESSAGES, COUNT_TOKENS)
GENERATING = (CHAT, COMPLETIONS, RESPONSES, MESSAGES)


def markdown_row(name: str, rule: FieldRule) -> str:
    """The row docs/server-api.md shows for a field: name, treatment (with the values of a
    refused field that are accepted), what the server does."""
    treatment = rule.treatment
    accepted = [json.dumps(value) for value in rule.neutral if value is not None]
    if rule.treatment in ("refused", RUNTIME_PENDING) and accepted:
        treatment += f" ({', '.join(f'`{value}`' for value in accepted)} accepted)"
    return f"| `{name}` | {treatment} | {rule.says} |"


def markdown_table(endpoint: Endpoint) -> str:
    rows = [markdown_row(name, rule) for name, rule in endpoint.table.items()]
    return "\n".join(["| field | treatment | what the server does |", "|---|---|---|", *rows])


# --- sample values --------------------------------------------------------------------------

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}},
    "required": ["city"],
}
REFUSED_SAMPLES: dict[str, Any] = {
    "repetition_penalty": 1.3,
    "repeat_penalty": 1.3,
    "presence_penalty": 0.5,
    "frequency_penalty": 0.5,
    "logit_bias": {"17": -100},
    "top_logprobs": 3,
    "best_of": 2,
    "audio": {"voice": "alloy", "format": "wav"},
    "modalities": ["text", "audio"],
    "prediction": {"type": "content", "content": "Once upon a time"},
    "web_search_options": {},
    "verbosity": "low",
    "functions": [{"name": "get_weather", "parameters": WEATHER}],
    "function_call": "auto",
    "suffix": "The end.",
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
    "tool_choice": "auto",
    "background": True,
    "background_options": {"completion_window": "2h"},
    "conversation": "conv_123",
    "prompt": {"id": "pmpt_123"},
    "context_management": [{"type": "compaction"}],
    "moderation": {"model": "omni-moderation-latest"},
    "mcp_servers": [{"type": "url", "url": "http://127.0.0.1:9/mcp", "name": "files"}],
    "container": "container_123",
}
"""A value that asks for what each refused field does (and gets its 400)."""
IGNORED_SAMPLES: dict[str, Any] = {
    "user": "user-1234",
    "safety_identifier": "user-1234",
    "metadata": {"user_id": "user-1234"},
    "store": True,
    "service_tier": "flex",
    "prompt_cache_key": "my-cache",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "implicit"},
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "inference_geo": "us",
    "stream_options": {"include_obfuscation": True},
    "access_programs": {"cyber": "standard"},
    "image": {"context_compression": "auto"},
    "output_config": {"effort": "high"},
}
"""What clients send in each field a table ignores on purpose (Claude Code's own values for
``metadata``, ``thinking``, ``context_management`` and ``output_config``)."""


def refused_sample(endpoint: Endpoint, name: str) -> Any:
    return REFUSED_SAMPLES[name]
