"""Tool turns in prompts (a tool-aware Qwen template, and the Hermes note for a template without
tools) and tool calls read back out of replies, whole and streamed in pieces."""

from __future__ import annotations

import json

from app.engine.runtime.chat_format.prompting import ChatMessage, render_chat
from app.engine.runtime.chat_format.tool_call_events import (
    ArgumentsPiece,
    CallEnded,
    CallStarted,
    ParsedReply,
    TextPiece,
    ToolCallEvents,
    parse_reply,
)
from app.engine.runtime.chat_format.tools import ToolCall, ToolSpec
from tests.runtime.tiny_model import CHATML_TEMPLATE

SPECIAL = {"bos_token": "", "eos_token": "<|im_end|>"}
WEATHER = ToolSpec(
    "get_weather", "The weather", json.dumps({"type": "object", "properties": {"city": {}}})
)
CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
CONVERSATION = (
    ChatMessage("user", "Weather in Paris?"),
    ChatMessage("assistant", "", tool_calls=(CALL,)),
    ChatMessage("tool", '{"temperature": 18}', tool_call_id="call_1"),
)
# Qwen2.5's template, cut to the parts that handle tools.
QWEN_TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n# Tools\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools><|im_end|>\n{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}<|im_start|>user\n{{ message.content }}<|im_end|>\n"
    "{%- elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content }}"
    "{%- for tool_call in message.tool_calls %}\n<tool_call>\n"
    '{"name": "{{ tool_call.function.name }}", "arguments": '
    "{{ tool_call.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}"
    "\n</tool_response><|im_end|>\n{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def test_a_tool_aware_template_gets_tools_calls_and_results() -> None:
    text = render_chat(
        QWEN_TOOLS_TEMPLATE,
        CONVERSATION,
        special_tokens=SPECIAL,
        model_name="qwen.gguf",
        tools=(WEATHER,),
    )
    assert '"name": "get_weather", "description": "The weather"' in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' in text
    assert '<tool_response>\n{"temperature": 18}\n</tool_response>' in text
    assert text.endswith("<|im_start|>assistant")


def test_a_template_without_tools_gets_the_hermes_convention() -> None:
    text = render_chat(
        CHATML_TEMPLATE,
        CONVERSATION,
        special_tokens=SPECIAL,
        model_name="demo.gguf",
        tools=(WEATHER,),
    )
    assert text.startswith("<|im_start|>system\n# Tools")
    assert '"name": "get_weather"' in text.split("<|im_end|>")[0]
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call><|im_end|>'
    ) in text
    assert '<|im_start|>user\n<tool_response>\n{"temperature": 18}\n</tool_response>' in text


def test_calls_in_both_formats_are_read_and_the_text_around_them_is_content() -> None:
    reply = parse_reply(
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'
        "</tool_call>\n<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>"
        "\n<arg_key>utc</arg_key>\n<arg_value>true</arg_value>\n</tool_call>"
    )
    assert reply.content == "Let me check."
    assert [(call.name, json.loads(call.arguments)) for call in reply.tool_calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"city": "Oslo", "utc": True}),
    ]
    assert len({call.id for call in reply.tool_calls}) == 2


def test_an_unreadable_block_stays_in_the_content_and_an_open_last_block_is_read() -> None:
    broken = parse_reply("<tool_call>{not json}</tool_call>")
    assert broken.tool_calls == () and broken.content == "<tool_call>{not json}</tool_call>"
    open_block = parse_reply('<tool_call>\n{"name": "f", "arguments": {}}')
    assert open_block.content is None and open_block.tool_calls[0].name == "f"


def test_a_stream_releases_content_at_once_and_streams_a_call_as_it_is_written() -> None:
    reader = ToolCallEvents()
    assert reader.feed("Sure <tool") == [TextPiece("Sure ")]
    assert reader.feed('_call>\n{"name": "f", ') == []
    started = reader.feed('"arguments": {"x"')
    assert [type(event) for event in started] == [CallStarted, ArgumentsPiece]
    assert started[0].name == "f" and started[1].text == '{"x"'
    assert reader.feed(": [1, 2") == [ArgumentsPiece(0, ": [1, 2")]
    ended = reader.feed("]}}\n</tool_call> done <b>")
    assert ended[0] == ArgumentsPiece(0, "]}")
    assert ended[1] == CallEnded(0, ToolCall(started[0].id, "f", '{"x": [1, 2]}'))
    assert ended[2:] == [TextPiece(" done <b>")]
    assert reader.feed("<tool_caX") == [TextPiece("<tool_caX")]
    assert reader.finish() == []


def test_a_call_cut_by_the_length_limit_is_a_call_never_raw_text() -> None:
    cut = parse_reply('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', cut=True)
    assert cut.content is None and not cut.complete
    assert [(call.name, call.arguments) for call in cut.tool_calls] == [
        ("get_weather", '{"city": "Par')
    ]
    nameless = parse_reply('Let me see. <tool_call>\n{"na', cut=True)
    assert nameless == ParsedReply("Let me see. ", ())
    assert parse_reply('<tool_call>\n{"na').content == '<tool_call>\n{"na'  # not cut: kept


def test_arguments_braces_inside_strings_do_not_end_the_call() -> None:
    reader = ToolCallEvents()
    events = reader.feed('<tool_call>{"name": "f", "arguments": {"s": "a } \\" {"}}</tool_call>')
    pieces = "".join(event.text for event in events if isinstance(event, ArgumentsPiece))
    assert json.loads(pieces) == {"s": 'a } " {'}
    assert reader.calls[0].arguments == json.dumps({"s": 'a } " {'})


def test_deepseek_calls_are_read_in_both_of_its_layouts() -> None:
    v3 = parse_reply(
        "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```json\n{"city": "Oslo"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    assert v3.content == "Checking."
    assert [(c.name, json.loads(c.arguments)) for c in v3.tool_calls] == [
        ("get_weather", {"city": "Oslo"})
    ]
    v31 = parse_reply(
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"city": "Rome"}'
        '<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Rome"}'
    )  # the model ended its turn before closing the block
    assert v31.content is None
    assert [c.name for c in v31.tool_calls] == ["get_time", "get_weather"]
