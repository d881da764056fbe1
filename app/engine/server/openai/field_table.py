"""Every field of OpenAI's chat and text completion requests, and what this server does with it
(:mod:`app.engine.server.core.field_rules`; shown in docs/server-api.md#request-fields)."""

from __future__ import annotations

from app.engine.server.core.field_rules import (
    END_USER,
    PENALTIES,
    PICKS_MODEL,
    RUNTIME_PENDING_SAMPLING,
    SAMPLING,
    FieldRule,
    honoured,
    ignored,
    refused,
    runtime_pending,
)

_LENGTH = honoured("the most tokens the reply may have (finish_reason length when it is cut)")
_STREAM = honoured("server-sent events as the reply is generated, ending with data: [DONE]")
_STREAM_OPTIONS = honoured(
    "include_usage: a last chunk with the usage; include_obfuscation is ignored (no padding is "
    "added: the server is local)"
)
_STOP = honoured("up to the server's limit of stop strings; the reply ends before the first")
_RESPONSE_FORMAT = honoured(
    "json_object or json_schema: every token is held to the schema while decoding"
)

CHAT_FIELDS: dict[str, FieldRule] = {
    "messages": honoured(
        "the conversation through the model's chat template: system, developer (a system "
        "turn), user, assistant and tool turns; a last assistant message is continued"
    ),
    "model": PICKS_MODEL,
    "max_tokens": _LENGTH,
    "max_completion_tokens": _LENGTH,
    **SAMPLING,
    "stop": _STOP,
    "stream": _STREAM,
    "stream_options": _STREAM_OPTIONS,
    "tools": honoured("function tools, rendered through the model's chat template"),
    "tool_choice": honoured("auto, none, required or a named function (the last two enforced)"),
    "parallel_tool_calls": honoured("false: the reply ends after its first tool call"),
    "response_format": _RESPONSE_FORMAT,
    "reasoning_effort": honoured(
        "given to a chat template that reads reasoning_effort; a 400 for a model whose "
        "template has no such setting"
    ),
    **PENALTIES,
    **RUNTIME_PENDING_SAMPLING,
    "logprobs": runtime_pending("the runtime does not report token log-probabilities", False),
    "top_logprobs": runtime_pending("the runtime does not report token log-probabilities", 0),
    "audio": refused("this server generates text only"),
    "modalities": refused("this server generates text only", ["text"]),
    "prediction": refused("predicted outputs are not used by this server"),
    "web_search_options": refused("this server runs no web search"),
    "verbosity": refused("the served model has no verbosity setting"),
    "functions": refused("the deprecated function fields: send tools instead", []),
    "function_call": refused("the deprecated function fields: send tool_choice instead"),
    "user": END_USER,
    "safety_identifier": END_USER,
    "metadata": ignored("tags for OpenAI's stored completions: this server stores nothing"),
    "store": ignored("this server stores no completions (the reply is the same either way)"),
    "service_tier": ignored("one queue: every request is served alike"),
    "prompt_cache_key": ignored(
        "prompts are kept and reused by their content, whatever the key (usage says how much "
        "was cached)"
    ),
    "prompt_cache_retention": ignored("kept prompts stay as long as the server's memory allows"),
}

COMPLETION_FIELDS: dict[str, FieldRule] = {
    "prompt": honoured("one prompt (a string, or a list holding one string), without a template"),
    "model": PICKS_MODEL,
    "max_tokens": _LENGTH,
    **SAMPLING,
    "stop": _STOP,
    "stream": _STREAM,
    "stream_options": _STREAM_OPTIONS,
    "echo": honoured("true: the reply's text starts with the prompt"),
    "response_format": _RESPONSE_FORMAT,
    **PENALTIES,
    **RUNTIME_PENDING_SAMPLING,
    "logprobs": runtime_pending("the runtime does not report token log-probabilities"),
    "best_of": runtime_pending("this server generates one reply per request", 1),
    "suffix": refused("this server does not fill in the middle of a text", ""),
    "tools": refused("tools need chat messages: use /v1/chat/completions", []),
    "tool_choice": refused("tools need chat messages: use /v1/chat/completions", "none"),
    "user": END_USER,
}
