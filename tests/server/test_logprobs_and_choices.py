"""Log-probabilities, ``n`` choices, ``min_tokens`` and ``ignore_eos`` through the real
``openai`` client against a running ``serve`` (the demo model).

What a user checks: the log-probabilities' tokens spell the reply, each is a log-probability
(≤ 0, alternatives most likely first), streamed ones equal whole ones, drafting (MTP) changes
none of them; ``n`` gives n choices, each the reply a single request with seed + index gets,
after one prefill of the prompt; ``ignore_eos`` runs to ``max_tokens``.
"""

from __future__ import annotations

import math

import pytest

from tests.server.server_process import ServerProcess
from tests.server.test_openai_client import MODEL, client_for, metric

pytestmark = pytest.mark.slow

STORY = [{"role": "user", "content": "Tell me a story about a dragon."}]
LONG_STORY = [
    {"role": "system", "content": "You are a storyteller who likes cats and long tales. " * 12},
    {"role": "user", "content": "Tell me a story about a cat."},
]
"""A prompt long enough (over 64 tokens) that the hybrid demo model keeps a checkpoint of it."""
CHECKPOINT_SPACING = 64
TOLERANCE = 1e-4


def _chat(server: ServerProcess, messages=STORY, **fields):
    extra = {
        key: fields.pop(key) for key in ("mtp_depth", "min_tokens", "ignore_eos") if key in fields
    }
    return client_for(server).chat.completions.create(
        model=MODEL, messages=messages, extra_body=extra, **fields
    )


def _figures(content) -> list[tuple[str, float, list[tuple[str, float]]]]:
    return [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs]) for t in content]


def _close(one, other) -> bool:
    return len(one) == len(other) and all(
        a[0] == b[0]
        and abs(a[1] - b[1]) <= TOLERANCE
        and [x[0] for x in a[2]] == [x[0] for x in b[2]]
        and all(abs(x[1] - y[1]) <= TOLERANCE for x, y in zip(a[2], b[2], strict=True))
        for a, b in zip(one, other, strict=True)
    )


def test_chat_logprobs_spell_the_reply_and_mtp_changes_none(server: ServerProcess) -> None:
    settings = {"max_tokens": 40, "temperature": 0, "logprobs": True, "top_logprobs": 3}
    plain = _chat(server, **settings, mtp_depth=0)
    drafted = _chat(server, **settings, mtp_depth=3)
    content = drafted.choices[0].logprobs.content
    assert "".join(t.token for t in content) == drafted.choices[0].message.content
    assert len(content) == drafted.usage.completion_tokens
    for token in content:
        assert token.logprob <= 0 and bytes(token.bytes) == token.token.encode("utf-8")
        alternatives = [a.logprob for a in token.top_logprobs]
        assert len(alternatives) == 3 and alternatives == sorted(alternatives, reverse=True)
        assert token.top_logprobs[0].token == token.token  # greedy took the likeliest
        assert sum(math.exp(value) for value in alternatives) <= 1 + 1e-6
    assert drafted.model_extra["mtp"]["accepted_by_depth"][0] > 0
    assert _close(_figures(content), _figures(plain.choices[0].logprobs.content))
    assert _chat(server, max_tokens=8, temperature=0).choices[0].logprobs is None


def test_streamed_logprobs_equal_the_whole_reply(server: ServerProcess) -> None:
    settings = {"max_tokens": 40, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    whole = _chat(server, **settings).choices[0].logprobs.content
    streamed = []
    for chunk in _chat(server, **settings, stream=True):
        if chunk.choices and chunk.choices[0].logprobs is not None:
            streamed += chunk.choices[0].logprobs.content
    assert _close(_figures(streamed), _figures(whole))


def test_logprobs_stop_where_a_stop_string_cuts_the_text(server: ServerProcess) -> None:
    settings = {"max_tokens": 40, "temperature": 0, "logprobs": True}
    full = _chat(server, **settings).choices[0].message.content
    stop = full[20:24]
    cut = _chat(server, **settings, stop=[stop]).choices[0]
    assert cut.message.content == full[: full.index(stop)]
    tokens = "".join(t.token for t in cut.logprobs.content)
    assert cut.message.content.startswith(tokens) and len(tokens) > len(cut.message.content) - 8


def test_a_special_token_among_the_alternatives_is_shown_by_name(server: ServerProcess) -> None:
    """Past the point where the model would end (``ignore_eos`` holds the end back), its end
    token leads the raw distribution: it is listed by its name, not as an empty token."""
    reply = _chat(
        server, max_tokens=160, temperature=0, logprobs=True, top_logprobs=5, ignore_eos=True
    )
    alternatives = [a for t in reply.choices[0].logprobs.content for a in t.top_logprobs]
    assert all(a.token for a in alternatives)
    ends = [a for a in alternatives if a.token == "<|im_end|>"]
    assert ends and all(bytes(a.bytes) == b"<|im_end|>" for a in ends)


def test_completion_logprobs_in_the_legacy_shape(server: ServerProcess) -> None:
    client = client_for(server)
    prompt = "Once upon a time"
    reply = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=24, temperature=0, logprobs=2, echo=True
    )
    choice = reply.choices[0]
    logprobs = choice.logprobs
    assert prompt + "".join(logprobs.tokens) == choice.text
    assert len(logprobs.token_logprobs) == len(logprobs.tokens) == reply.usage.completion_tokens
    assert all(value <= 0 for value in logprobs.token_logprobs)
    assert all(len(top) <= 2 and top for top in logprobs.top_logprobs)
    offsets = logprobs.text_offset
    assert offsets[0] == len(prompt)
    assert [choice.text[o:] for o in offsets] == [
        "".join(logprobs.tokens[i:]) for i in range(len(offsets))
    ]
    streamed = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=24, temperature=0, logprobs=2, stream=True
    )
    tokens: list[str] = []
    values: list[float] = []
    for chunk in streamed:
        if chunk.choices and chunk.choices[0].logprobs is not None:
            tokens += chunk.choices[0].logprobs.tokens
            values += chunk.choices[0].logprobs.token_logprobs
    assert tokens == logprobs.tokens
    assert (
        max(abs(a - b) for a, b in zip(values, logprobs.token_logprobs, strict=True)) <= TOLERANCE
    )


def test_n_choices_are_single_requests_with_seed_plus_index(server: ServerProcess) -> None:
    settings = {"max_tokens": 24, "temperature": 1.2, "seed": 40, "mtp_depth": 2}
    settings["messages"] = LONG_STORY
    cached = metric(server, "mtp_studio_prompt_tokens_cached_total")
    reply = _chat(server, **settings, n=3)
    assert [choice.index for choice in reply.choices] == [0, 1, 2]
    texts = [choice.message.content for choice in reply.choices]
    assert len(set(texts)) > 1
    prompt = reply.usage.prompt_tokens
    # the prompt was prefilled once: the later choices resumed from its kept state (a hybrid
    # model's checkpoint, at most 64 tokens before the prompt's end)
    reused = metric(server, "mtp_studio_prompt_tokens_cached_total") - cached
    assert reused >= 2 * (prompt - CHECKPOINT_SPACING)
    assert reply.usage.completion_tokens == sum(
        _chat(server, **{**settings, "seed": 40 + index}).usage.completion_tokens
        for index in range(3)
    )
    singles = [
        _chat(server, **{**settings, "seed": 40 + index}).choices[0].message.content
        for index in range(3)
    ]
    assert singles == texts
    streamed: dict[int, str] = {}
    for chunk in _chat(server, **settings, n=3, stream=True):
        for choice in chunk.choices:
            streamed[choice.index] = streamed.get(choice.index, "") + (choice.delta.content or "")
    assert streamed == dict(enumerate(texts))


def test_n_choices_on_completions(server: ServerProcess) -> None:
    reply = client_for(server).completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=1.2, seed=3, n=2
    )
    assert [choice.index for choice in reply.choices] == [0, 1]
    assert reply.choices[0].text != reply.choices[1].text


def test_ignore_eos_and_min_tokens_hold_the_end_back(server: ServerProcess) -> None:
    free = _chat(server, max_tokens=200, temperature=0)
    assert free.choices[0].finish_reason == "stop"
    generated = free.usage.completion_tokens
    ignoring = _chat(server, max_tokens=generated + 10, temperature=0, ignore_eos=True)
    assert ignoring.choices[0].finish_reason == "length"
    assert ignoring.usage.completion_tokens == generated + 10
    least = _chat(server, max_tokens=200, temperature=0, min_tokens=generated + 5)
    assert least.usage.completion_tokens >= generated + 5
    assert least.choices[0].message.content.startswith(free.choices[0].message.content)


def test_responses_logprobs_whole_and_streamed(server: ServerProcess) -> None:
    client = client_for(server)
    asked = {
        "model": MODEL,
        "input": "Tell me a story about a dragon.",
        "max_output_tokens": 32,
        "temperature": 0,
        "include": ["message.output_text.logprobs"],
        "top_logprobs": 2,
    }
    whole = client.responses.create(**asked)
    part = whole.output[0].content[0]
    assert "".join(entry.token for entry in part.logprobs) == part.text == whole.output_text
    streamed = []
    for event in client.responses.create(**asked, stream=True):
        if event.type == "response.output_text.delta":
            streamed += [(entry.token, entry.logprob) for entry in event.logprobs]
    assert [entry.token for entry in part.logprobs] == [token for token, _ in streamed]
    largest = max(
        abs(entry.logprob - value)
        for entry, (_token, value) in zip(part.logprobs, streamed, strict=True)
    )
    assert largest <= TOLERANCE
