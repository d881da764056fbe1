"""Every field of an OpenAI Responses API request, and what this server does with it
(:mod:`app.engine.server.core.field_rules`; shown in docs/server-api.md#request-fields)."""

from __future__ import annotations

from app.engine.server.core.field_rules import (
    END_USER,
    PICKS_MODEL,
    SAMPLING,
    FieldRule,
    honoured,
    ignored,
    refused,
)

RESPONSES_FIELDS: dict[str, FieldRule] = {
    "input": honoured(
        "a string, or messages, function calls and their outputs; a last assistant message is "
        "continued; reasoning items are passed over with a line in the log"
    ),
    "instructions": honoured(
        "a system message before the input (not carried over by previous_response_id, as on OpenAI)"
    ),
    "model": PICKS_MODEL,
    "max_output_tokens": honoured(
        "the most tokens the reply may have (status incomplete, reason max_output_tokens)"
    ),
    **SAMPLING,
    "stream": honoured("the Responses event stream as the reply is generated"),
    "tools": honoured("function tools; any other tool type is a 400 naming it"),
    "tool_choice": honoured("auto, none, required or a named function (the last two enforced)"),
    "parallel_tool_calls": honoured("false: the reply ends after its first function call"),
    "max_tool_calls": honoured("the reply ends after this many function calls"),
    "text": honoured(
        "format text, json_object or json_schema (every token held to the schema); a "
        "verbosity other than medium is a 400 (the model has no such setting)"
    ),
    "reasoning": honoured(
        "effort is given to a chat template that reads reasoning_effort (a 400 for other "
        "models); a summary is a 400 (the server writes none)"
    ),
    "previous_response_id": honoured(
        "continues the kept conversation of an earlier response (the server keeps the last "
        "256 responses for an hour)"
    ),
    "store": honoured(
        "false: the response is not kept, so neither GET /v1/responses/{id} nor "
        "previous_response_id can find it"
    ),
    "metadata": honoured("returned as given in the response object"),
    "include": honoured(
        "reasoning.encrypted_content is accepted (no reasoning items are written); "
        "message.output_text.logprobs puts each token's log-probability in the output text; any "
        "other value is a 400"
    ),
    "top_logprobs": honoured(
        "0 to 20: the likeliest tokens at each position, with their log-probabilities, in the "
        "output text's logprobs (above 0, log-probabilities are reported without include too)"
    ),
    "truncation": honoured(
        "auto: the oldest turns are left out while the conversation does not fit the context "
        "(the system prompt and the last user message stay); disabled (the default): a prompt "
        "that does not fit is a 400"
    ),
    "background": refused("a response runs while its request waits", False),
    "background_options": refused("a response runs while its request waits"),
    "conversation": refused(
        "the Conversations API is not served: send previous_response_id or the whole input"
    ),
    "prompt": refused("stored prompt templates are OpenAI's: send instructions and input"),
    "context_management": refused("the server compacts no conversation", []),
    "moderation": refused("this server runs no moderation model"),
    "stream_options": ignored("include_obfuscation: no padding is added (the server is local)"),
    "user": END_USER,
    "safety_identifier": END_USER,
    "service_tier": ignored("one queue: every request is served alike"),
    "access_programs": ignored("OpenAI's access programs: a local model has none"),
    "image": ignored("image context options: images are not compressed by this server"),
    "prompt_cache_key": ignored(
        "prompts are kept and reused by their content, whatever the key (usage says how much "
        "was cached)"
    ),
    "prompt_cache_retention": ignored("kept prompts stay as long as the server's memory allows"),
    "prompt_cache_options": ignored("kept prompts stay as long as the server's memory allows"),
}
