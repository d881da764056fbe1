"""Checks of the OpenAI fields that shape what a reply reports and how long and how many replies
run: ``logprobs``, ``top_logprobs``, ``n``, ``min_tokens`` and ``ignore_eos`` — each asserts
what a user would see (log-probabilities spelling the reply, n choices, a reply reaching
``max_tokens``)."""

from __future__ import annotations

import math
from typing import Any

from tests.server.field_checks import Endpoint
from tests.server.honoured_checks import Check, output_tokens, refused
from tests.server.server_process import ServerProcess

ENDING_PROMPT = "<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\n"
"""A raw prompt in the demo model's chat markup, so a text completion ends by itself."""


def _ending(
    endpoint: Endpoint, server: ServerProcess, max_tokens: int = 200, **fields: Any
) -> dict[str, Any]:
    """The reply to a prompt whose greedy reply ends by itself (within 200 tokens)."""
    prompt = {"prompt": ENDING_PROMPT} if endpoint.key == "completions" else {}
    return endpoint.reply(server, max_tokens=max_tokens, **prompt, **fields)


def _tokens(endpoint: Endpoint, reply: dict[str, Any]) -> list[tuple[str, float]]:
    logprobs = reply["choices"][0]["logprobs"]
    if endpoint.key == "chat":
        return [(entry["token"], entry["logprob"]) for entry in logprobs["content"]]
    return list(zip(logprobs["tokens"], logprobs["token_logprobs"], strict=True))


def _logprobs(endpoint: Endpoint, server: ServerProcess) -> None:
    asked = {"logprobs": True} if endpoint.key == "chat" else {"logprobs": 0}
    reply = endpoint.reply(server, **asked)
    tokens = _tokens(endpoint, reply)
    assert "".join(token for token, _ in tokens) == endpoint.text(reply)
    assert all(value <= 0 for _, value in tokens)
    assert endpoint.reply(server)["choices"][0]["logprobs"] is None
    if endpoint.key == "completions":
        top = endpoint.reply(server, logprobs=3)["choices"][0]["logprobs"]["top_logprobs"]
        assert all(len(alternatives) == 3 for alternatives in top)
        refused(endpoint, server, "logprobs", logprobs=21)


def _top_logprobs(endpoint: Endpoint, server: ServerProcess) -> None:
    reply = endpoint.reply(server, logprobs=True, top_logprobs=4)
    for entry in reply["choices"][0]["logprobs"]["content"]:
        alternatives = [top["logprob"] for top in entry["top_logprobs"]]
        assert len(alternatives) == 4 and alternatives == sorted(alternatives, reverse=True)
        assert entry["top_logprobs"][0]["token"] == entry["token"]  # greedy: the likeliest
        assert sum(math.exp(value) for value in alternatives) <= 1 + 1e-6
    refused(endpoint, server, "top_logprobs", top_logprobs=3)  # without logprobs: true


def _responses_top_logprobs(endpoint: Endpoint, server: ServerProcess) -> None:
    reply = endpoint.reply(server, top_logprobs=2, stream=False)
    part = reply["output"][0]["content"][0]
    assert "".join(entry["token"] for entry in part["logprobs"]) == part["text"]
    for entry in part["logprobs"]:
        assert entry["top_logprobs"][0]["token"] == entry["token"]  # greedy: the likeliest
        assert len(entry["top_logprobs"]) == 2 and entry["logprob"] <= 0
    refused(endpoint, server, "top_logprobs", top_logprobs=21)


def _n(endpoint: Endpoint, server: ServerProcess) -> None:
    reply = endpoint.reply(server, n=3, temperature=1.5, seed=11)
    assert [choice["index"] for choice in reply["choices"]] == [0, 1, 2]
    texts = {endpoint.text({"choices": [choice]}) for choice in reply["choices"]}
    assert len(texts) > 1
    refused(endpoint, server, "n", n=0)


def _min_tokens(endpoint: Endpoint, server: ServerProcess) -> None:
    free = _ending(endpoint, server)
    generated = output_tokens(endpoint, free)
    assert free["choices"][0]["finish_reason"] == "stop", "the demo's reply ends by itself"
    held = _ending(endpoint, server, min_tokens=generated + 5)
    assert output_tokens(endpoint, held) >= generated + 5
    refused(endpoint, server, "min_tokens", max_tokens=10, min_tokens=11)


def _ignore_eos(endpoint: Endpoint, server: ServerProcess) -> None:
    free = _ending(endpoint, server)
    assert free["choices"][0]["finish_reason"] == "stop", "the demo's reply ends by itself"
    longer = output_tokens(endpoint, free) + 6
    reply = _ending(endpoint, server, max_tokens=longer, ignore_eos=True)
    assert reply["choices"][0]["finish_reason"] == "length"
    assert output_tokens(endpoint, reply) == longer


REPLY_SHAPE: dict[tuple[str, str], Check] = {
    **{(key, "logprobs"): _logprobs for key in ("chat", "completions")},
    ("chat", "top_logprobs"): _top_logprobs,
    ("responses", "top_logprobs"): _responses_top_logprobs,
    **{(key, "n"): _n for key in ("chat", "completions")},
    **{(key, "min_tokens"): _min_tokens for key in ("chat", "completions")},
    **{(key, "ignore_eos"): _ignore_eos for key in ("chat", "completions")},
}
