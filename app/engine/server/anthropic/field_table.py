"""Every field of Anthropic's Messages and count_tokens requests, and what this server does with
it (:mod:`app.engine.server.core.field_rules`; shown in docs/server-api.md#request-fields).

Claude Code (2.1) sends ``metadata``, ``thinking`` (adaptive), ``context_management`` (clearing
old thinking) and ``output_config`` (effort) with every request, so each has a treatment here.
"""

from __future__ import annotations

from app.engine.server.core.field_rules import (
    PICKS_MODEL,
    SAMPLING,
    FieldRule,
    honoured,
    ignored,
    refused,
)

_CONVERSATION = {
    "messages": honoured(
        "user and assistant turns (text, tool_use and tool_result blocks; a system turn inside "
        "the conversation stays where it is); a last assistant turn is continued; thinking, "
        "redacted_thinking and document blocks are passed over with a line in the log"
    ),
    "system": honoured("the system prompt: a string or text blocks"),
    "model": PICKS_MODEL,
    "tools": honoured("custom tools, rendered through the model's chat template"),
    "tool_choice": honoured("auto, none, any or a named tool (the last two enforced)"),
    "thinking": ignored(
        "the model thinks as its chat template decides, and its reasoning comes back as text, "
        "not thinking blocks (Claude Code sends adaptive thinking with every request)"
    ),
    "context_management": ignored(
        "thinking blocks are always left out of the prompt, and a prompt that no longer fits "
        "is a 400 in Anthropic's words, which tells the client to compact its conversation"
    ),
    "output_config": honoured(
        "format (json_schema): every token is held to the schema while decoding; effort is "
        "ignored on purpose (the served model has no effort setting)"
    ),
    "mcp_servers": refused("this server connects to no MCP servers; run the tools client-side", []),
}

MESSAGES_FIELDS: dict[str, FieldRule] = {
    **_CONVERSATION,
    "max_tokens": honoured("the most tokens the reply may have (stop_reason max_tokens)"),
    "stop_sequences": honoured("the reply ends before the first (stop_reason stop_sequence)"),
    "stream": honoured("Anthropic's event stream as the reply is generated"),
    **SAMPLING,
    "metadata": ignored(
        "user_id for Anthropic's abuse detection: nothing to monitor on a local server, and it "
        "is never logged"
    ),
    "service_tier": ignored("one queue: every request is served alike"),
    "container": refused("this server runs no code-execution containers"),
    "inference_geo": ignored("the model runs on this machine"),
}

COUNT_TOKENS_FIELDS: dict[str, FieldRule] = {
    **_CONVERSATION,
    "output_config": ignored("an output format or effort does not change the prompt counted"),
}
