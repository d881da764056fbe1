"""Checks of honoured request fields: the reply changes the way the field table says.

The shared ones (sampling, length, stop strings, streaming) work on every generating endpoint;
the others here belong to the chat and text completion endpoints, and to the tool and
structured-output fields all APIs have (:mod:`.conversation_checks` holds the rest). Each check
sends real requests to the demo model's server over raw HTTP and asserts what a user would see.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import jsonschema

from app.engine.runtime.backends.llama_cpp.vocabulary_only import VocabularyOnly
from app.engine.runtime.core.demo_model import demo_model_path
from tests.server.field_checks import USER, WEATHER, Endpoint
from tests.server.server_process import ServerProcess

Check = Callable[[Endpoint, ServerProcess], None]
HOT = {"temperature": 1.5, "mtp_depth": 0}
"""Sampling spread wide enough that the demo model's replies differ between seeds."""


def streamed_text(
    endpoint: Endpoint, server: ServerProcess, **fields: Any
) -> tuple[list[str], list[dict[str, Any]]]:
    """The stream's pieces of text, in order, and the data of every event."""
    body = {**endpoint.base, "temperature": 0, **fields, "stream": True}
    url = f"{server.root_url}{endpoint.path}"
    with httpx2.stream("POST", url, json=body, timeout=120) as answer:
        assert answer.status_code == 200 and "text/event-stream" in answer.headers["content-type"]
        events = [
            json.loads(line[6:])
            for line in answer.iter_lines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    return [_text_of(endpoint, event) for event in events], events


def _text_of(endpoint: Endpoint, event: dict[str, Any]) -> str:
    if endpoint.key == "chat":
        return "".join((choice["delta"].get("content") or "") for choice in event["choices"])
    if endpoint.key == "completions":
        return "".join(choice["text"] for choice in event["choices"])
    if endpoint.key == "responses":
        return event["delta"] if event["type"] == "response.output_text.delta" else ""
    delta = event.get("delta") or {}
    return delta.get("text", "") if delta.get("type") == "text_delta" else ""


def output_tokens(endpoint: Endpoint, reply: dict[str, Any]) -> int:
    usage = reply["usage"]
    return usage.get("completion_tokens", usage.get("output_tokens"))


def cut_reason(endpoint: Endpoint, reply: dict[str, Any]) -> str:
    if endpoint.key == "responses":
        return reply["incomplete_details"]["reason"]
    if endpoint.anthropic:
        return reply["stop_reason"]
    return reply["choices"][0]["finish_reason"]


def refused(endpoint: Endpoint, server: ServerProcess, name: str, **fields: Any) -> str:
    """The message of the 400 that ``fields`` get, which must name ``name``."""
    answer = endpoint.post(server, **fields)
    assert answer.status_code == 400, answer.text
    param, message = endpoint.refusal(answer)
    assert param == name or (endpoint.anthropic and f"'{name}'" in message), message
    return message


# --- shared by every generating endpoint ------------------------------------------------------


def _temperature(endpoint: Endpoint, server: ServerProcess) -> None:
    greedy = endpoint.say(server)
    assert endpoint.say(server) == greedy
    sampled = {endpoint.text(endpoint.reply(server, **HOT, seed=seed)) for seed in range(4)}
    assert len(sampled) > 1 and sampled != {greedy}


def _keeps_only_the_likeliest(field: str, value: float) -> Check:
    def check(endpoint: Endpoint, server: ServerProcess) -> None:
        hot = {endpoint.text(endpoint.reply(server, **HOT, seed=seed)) for seed in range(3)}
        kept = endpoint.text(endpoint.reply(server, **HOT, seed=0, **{field: value}))
        assert kept == endpoint.say(server) and hot != {kept}

    return check


def _seed(endpoint: Endpoint, server: ServerProcess) -> None:
    settings = {"temperature": 1.2, "mtp_depth": 2}
    first = endpoint.text(endpoint.reply(server, **settings, seed=7))
    assert endpoint.text(endpoint.reply(server, **settings, seed=7)) == first
    others = {endpoint.text(endpoint.reply(server, **settings, seed=seed)) for seed in (8, 9, 10)}
    assert others - {first}


def _mtp_depth(endpoint: Endpoint, server: ServerProcess) -> None:
    for depth in (0, 2, "auto"):
        assert endpoint.reply(server, mtp_depth=depth)["mtp"]["depth"] == depth
    refused(endpoint, server, "mtp_depth", mtp_depth="deep")


def _length(field: str | None = None) -> Check:
    def check(endpoint: Endpoint, server: ServerProcess) -> None:
        name = field or endpoint.length_field
        assert name is not None
        reply = endpoint.reply(server, **{"temperature": 0, name: 3})
        assert output_tokens(endpoint, reply) == 3
        assert cut_reason(endpoint, reply) in ("length", "max_tokens", "max_output_tokens")

    return check


def _stop(endpoint: Endpoint, server: ServerProcess) -> None:
    assert endpoint.length_field is not None
    long = {endpoint.length_field: 40}
    full = endpoint.say(server, **long)
    stop = full[12:16]
    assert stop.strip(), f"pick another stop in {full!r}"
    cut = endpoint.say(server, **long, **{endpoint.named("stop"): [stop]})
    assert cut == full[: full.index(stop)]


def _stream(endpoint: Endpoint, server: ServerProcess) -> None:
    pieces, _events = streamed_text(endpoint, server)
    assert len([piece for piece in pieces if piece]) > 1
    assert "".join(pieces) == endpoint.say(server)


def _model(endpoint: Endpoint, server: ServerProcess) -> None:
    """The model a request names answers and is named in the reply; a name the server does not
    have is a 404 naming it, never another model's answer."""
    missing = endpoint.post(server, model="no-such-model")
    assert missing.status_code == 404, missing.text
    assert "no-such-model" in missing.text
    served = demo_model_path().stem
    reply = endpoint.reply(server, model=served)
    if endpoint.length_field is not None:  # count_tokens names no model
        assert reply["model"] == served


SHARED: dict[str, Check] = {
    "model": _model,
    "temperature": _temperature,
    "top_k": _keeps_only_the_likeliest("top_k", 1),
    "top_p": _keeps_only_the_likeliest("top_p", 1e-9),
    "min_p": _keeps_only_the_likeliest("min_p", 0.999),
    "seed": _seed,
    "mtp_depth": _mtp_depth,
    "max_tokens": _length("max_tokens"),
    "max_output_tokens": _length("max_output_tokens"),
    "stop": _stop,
    "stop_sequences": _stop,
    "stream": _stream,
}


# --- one endpoint's fields --------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
FLAT_TOOLS = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "input_schema": WEATHER}]
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
}


def continued(endpoint: Endpoint, server: ServerProcess, **extra: Any) -> None:
    """A last assistant message is continued: the greedy reply after it is the rest of the
    greedy reply it was cut from."""
    assert endpoint.length_field is not None
    full = endpoint.say(server, **{endpoint.length_field: 30}, **extra)
    prefix = full[: full.index(" ", 8)]
    turns = {"input" if endpoint.key == "responses" else "messages": [
        *USER, {"role": "assistant", "content": prefix}
    ]}  # fmt: skip
    rest = endpoint.say(server, **{endpoint.length_field: 8}, **turns, **extra)
    assert rest and full.startswith(prefix + rest), (full, prefix, rest)


def _chat_messages(endpoint: Endpoint, server: ServerProcess) -> None:
    continued(endpoint, server)
    prompts = [
        endpoint.reply(server, messages=[{"role": role, "content": "Be brief."}, *USER])
        for role in ("developer", "system")
    ]
    assert prompts[0]["usage"]["prompt_tokens"] == prompts[1]["usage"]["prompt_tokens"]


def _tool_call_arguments(endpoint: Endpoint, reply: dict[str, Any]) -> list[dict[str, Any]]:
    if endpoint.key == "chat":
        calls = reply["choices"][0]["message"].get("tool_calls") or []
        return [json.loads(call["function"]["arguments"]) for call in calls]
    if endpoint.key == "responses":
        items = [item for item in reply["output"] if item["type"] == "function_call"]
        return [json.loads(item["arguments"]) for item in items]
    return [block["input"] for block in reply["content"] if block["type"] == "tool_use"]


def _tools_fields(endpoint: Endpoint) -> dict[str, Any]:
    if endpoint.key == "chat":
        return {"tools": TOOLS, "tool_choice": "required", "max_tokens": 120}
    if endpoint.key == "responses":
        return {"tools": FLAT_TOOLS, "tool_choice": "required", "max_output_tokens": 120}
    return {"tools": ANTHROPIC_TOOLS, "tool_choice": {"type": "any"}, "max_tokens": 120}


def _tools(endpoint: Endpoint, server: ServerProcess) -> None:
    calls = _tool_call_arguments(endpoint, endpoint.reply(server, **_tools_fields(endpoint)))
    assert len(calls) == 1
    jsonschema.validate(calls[0], WEATHER)


def prompt_tokens(endpoint: Endpoint, reply: dict[str, Any]) -> int:
    usage = reply["usage"]
    if endpoint.anthropic:
        return usage["input_tokens"] + usage["cache_read_input_tokens"]
    return usage.get("prompt_tokens", usage.get("input_tokens"))


def _tool_choice(endpoint: Endpoint, server: ServerProcess) -> None:
    _tools(endpoint, server)
    tools = {key: value for key, value in _tools_fields(endpoint).items() if key == "tools"}
    none = {"type": "none"} if endpoint.anthropic else "none"
    hidden = endpoint.reply(server, **tools, tool_choice=none)
    assert _tool_call_arguments(endpoint, hidden) == []
    assert prompt_tokens(endpoint, hidden) == prompt_tokens(endpoint, endpoint.reply(server))


def _one_call(field: str, value: Any) -> Check:
    def check(endpoint: Endpoint, server: ServerProcess) -> None:
        reply = endpoint.reply(server, **_tools_fields(endpoint), **{field: value})
        assert len(_tool_call_arguments(endpoint, reply)) == 1
        refused(endpoint, server, field, **{field: "yes"})

    return check


def _structured(endpoint: Endpoint, server: ServerProcess) -> None:
    if endpoint.key == "responses":
        fields = {"text": {"format": {"type": "json_schema", "name": "p", "schema": PERSON}}}
    elif endpoint.anthropic:
        fields = {"output_config": {"format": {"type": "json_schema", "schema": PERSON}}}
    else:
        fields = {"response_format": {"type": "json_schema", "json_schema": {"schema": PERSON}}}
    text = endpoint.say(server, **fields, **{endpoint.length_field or "": 200})
    jsonschema.validate(json.loads(text), PERSON)


def _reasoning_effort(field: str, value: Any) -> Check:
    def check(endpoint: Endpoint, server: ServerProcess) -> None:
        message = refused(endpoint, server, field, **value("high"))
        assert "chat template" in message and "reasoning_effort" in message
        assert "must be one of" in refused(endpoint, server, field, **value("bogus"))

    return check


def _stream_options(endpoint: Endpoint, server: ServerProcess) -> None:
    _pieces, events = streamed_text(endpoint, server, stream_options={"include_usage": True})
    carrying = [event for event in events if event.get("usage")]
    assert carrying == [events[-1]] and events[-1]["choices"] == []
    assert events[-1]["usage"]["completion_tokens"] >= 1


def _prompt(endpoint: Endpoint, server: ServerProcess) -> None:
    text = endpoint.say(server, prompt="def fibonacci(n):")
    assert endpoint.say(server, prompt=["def fibonacci(n):"]) == text
    assert text != endpoint.say(server)


def _echo(endpoint: Endpoint, server: ServerProcess) -> None:
    plain = endpoint.say(server)
    assert endpoint.say(server, echo=True) == "Once upon a time" + plain
    pieces, _events = streamed_text(endpoint, server, echo=True)
    assert "".join(pieces) == "Once upon a time" + plain


def _repeated_words(text: str) -> int:
    words = text.split()
    return len(words) - len(set(words))


def _penalises_repeats(field: str, value: float) -> Check:
    """A strong penalty makes the greedy reply repeat itself less."""

    def check(endpoint: Endpoint, server: ServerProcess) -> None:
        long = {endpoint.length_field: 48}
        greedy = endpoint.say(server, **long)
        penalised = endpoint.say(server, **long, **{field: value})
        assert penalised != greedy
        assert _repeated_words(penalised) < _repeated_words(greedy), (greedy, penalised)

    return check


def _logit_bias(endpoint: Endpoint, server: ServerProcess) -> None:
    """+100 makes a token the whole reply; -100 bans the reply's first token."""
    vocabulary = VocabularyOnly(demo_model_path())
    try:
        greedy = endpoint.say(server)
        first = vocabulary.tokenize(greedy, parse_special=False)[0]
        (only,) = vocabulary.tokenize(" the", parse_special=False)
    finally:
        vocabulary.close()
    assert endpoint.say(server, logit_bias={str(only): 100}) == " the" * 12
    banned = endpoint.say(server, logit_bias={str(first): -100})
    assert banned != greedy and not banned.startswith(greedy[:3]), (greedy, banned)
    refused(endpoint, server, "logit_bias", logit_bias={"dragon": 5})


SPECIFIC: dict[tuple[str, str], Check] = {
    ("chat", "messages"): _chat_messages,
    ("chat", "max_completion_tokens"): _length("max_completion_tokens"),
    ("chat", "stream_options"): _stream_options,
    ("chat", "presence_penalty"): _penalises_repeats("presence_penalty", 2.0),
    ("chat", "frequency_penalty"): _penalises_repeats("frequency_penalty", 2.0),
    ("chat", "repetition_penalty"): _penalises_repeats("repetition_penalty", 1.8),
    ("chat", "repeat_penalty"): _penalises_repeats("repeat_penalty", 1.8),
    ("chat", "logit_bias"): _logit_bias,
    ("chat", "tools"): _tools,
    ("chat", "tool_choice"): _tool_choice,
    ("chat", "parallel_tool_calls"): _one_call("parallel_tool_calls", False),
    ("chat", "response_format"): _structured,
    ("chat", "reasoning_effort"): _reasoning_effort(
        "reasoning_effort", lambda effort: {"reasoning_effort": effort}
    ),
    ("completions", "prompt"): _prompt,
    ("completions", "echo"): _echo,
    ("completions", "stream_options"): _stream_options,
    ("completions", "presence_penalty"): _penalises_repeats("presence_penalty", 2.0),
    ("completions", "frequency_penalty"): _penalises_repeats("frequency_penalty", 2.0),
    ("completions", "repetition_penalty"): _penalises_repeats("repetition_penalty", 1.8),
    ("completions", "repeat_penalty"): _penalises_repeats("repeat_penalty", 1.8),
    ("completions", "logit_bias"): _logit_bias,
    ("completions", "response_format"): _structured,
    ("responses", "tools"): _tools,
    ("responses", "tool_choice"): _tool_choice,
    ("responses", "parallel_tool_calls"): _one_call("parallel_tool_calls", False),
    ("responses", "max_tool_calls"): _one_call("max_tool_calls", 1),
    ("responses", "text"): _structured,
    ("responses", "reasoning"): _reasoning_effort(
        "reasoning.effort", lambda effort: {"reasoning": {"effort": effort}}
    ),
    ("messages", "tools"): _tools,
    ("messages", "tool_choice"): _tool_choice,
    ("messages", "output_config"): _structured,
}
