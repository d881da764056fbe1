"""``mtp-studio serve`` in another process, called with the real ``openai`` client as users do.

Models list, whole and streamed chat replies, raw completions, stop sequences, four concurrent
requests, a disconnect that cancels the generation, MTP statistics in every reply and in
/metrics, and the server binding only the loopback address. The server runs with its default
depth (auto); tests that check per-depth drafts ask for a fixed ``mtp_depth``.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import openai
import pytest
from openai import OpenAI

from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

MODEL = "demo-mtp"
PROMPT = [{"role": "user", "content": "Hello, who are you?"}]
LONG_PROMPT = [{"role": "user", "content": "Write a long story about a dragon."}]
DEPTH = 3
FIXED = {"mtp_depth": DEPTH}


def client_for(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def metric(server: ServerProcess, name: str, labels: str = "") -> float:
    text = httpx2.get(f"{server.root_url}/metrics").text
    pattern = rf"^{re.escape(name)}{re.escape('{' + labels + '}' if labels else '')} (\S+)$"
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_models_lists_the_served_model_with_its_mtp_head(server: ServerProcess) -> None:
    models = client_for(server).models.list()
    assert [model.id for model in models.data] == [MODEL]
    mtp = models.data[0].model_extra["mtp"]
    assert (mtp["status"], mtp["layers"], mtp["depth"]) == ("head", 1, "auto")


def test_whole_chat_reply_has_text_usage_and_mtp_statistics(server: ServerProcess) -> None:
    reply = client_for(server).chat.completions.create(
        model=MODEL, messages=PROMPT, max_tokens=24, temperature=0, extra_body=FIXED
    )
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens <= 24 and reply.usage.prompt_tokens > 5
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    mtp = reply.model_extra["mtp"]
    assert mtp["depth"] == DEPTH and mtp["generated_tokens"] == reply.usage.completion_tokens
    assert len(mtp["drafted_by_depth"]) == DEPTH and mtp["drafted_by_depth"][0] > 0
    assert 0 <= mtp["accepted_by_depth"][0] <= mtp["drafted_by_depth"][0]
    assert mtp["decode_tokens_per_second"] > 0


def test_streamed_reply_equals_the_whole_one_and_ends_with_statistics(
    server: ServerProcess,
) -> None:
    client = client_for(server)
    # the worker sends what it has every CHUNK_INTERVAL_SECONDS (20 ms): a 40-token reply can be
    # written within two intervals on a quick machine, so the reply is made long enough to stream
    # in many pieces anywhere
    long_enough = {**FIXED, "ignore_eos": True}
    whole = client.chat.completions.create(
        model=MODEL, messages=PROMPT, max_tokens=800, temperature=0, extra_body=long_enough
    )
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=PROMPT,
            max_tokens=800,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=long_enough,
        )
    )
    *text_chunks, usage_chunk = chunks
    pieces = [chunk.choices[0].delta.content or "" for chunk in text_chunks]
    assert len([piece for piece in pieces if piece]) > 5, "the reply came in one burst"
    assert "".join(pieces) == whole.choices[0].message.content
    last = text_chunks[-1]
    assert last.choices[0].finish_reason == whole.choices[0].finish_reason
    assert usage_chunk.choices == [] and all(chunk.usage is None for chunk in text_chunks)
    assert usage_chunk.usage.completion_tokens == whole.usage.completion_tokens
    assert (
        last.model_extra["mtp"]["accepted_by_depth"]
        == whole.model_extra["mtp"]["accepted_by_depth"]
    ), "greedy decoding with the same depth accepts the same drafts"


def test_sampling_fields_and_seed_make_a_reply_reproducible(server: ServerProcess) -> None:
    client = client_for(server)
    settings = dict(temperature=0.8, top_p=0.9, max_tokens=24, seed=1234)
    # auto picks each cycle's depth by measured speed, and the depths decide which random draws a
    # sampled reply uses: a seed reproduces a reply at a fixed depth
    extra = {"top_k": 40, "min_p": 0.05, **FIXED}
    replies = [
        client.chat.completions.create(model=MODEL, messages=PROMPT, extra_body=extra, **settings)
        for _ in range(2)
    ]
    assert replies[0].choices[0].message.content == replies[1].choices[0].message.content


def test_system_user_assistant_history_is_accepted(server: ServerProcess) -> None:
    messages = [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "What can you do?"},
    ]
    reply = client_for(server).chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, temperature=0
    )
    single = client_for(server).chat.completions.create(
        model=MODEL, messages=messages[-1:], max_tokens=8, temperature=0
    )
    assert reply.usage.prompt_tokens > single.usage.prompt_tokens + 10


def test_stop_sequence_cuts_the_reply_before_it(server: ServerProcess) -> None:
    client = client_for(server)
    full = (
        client.chat.completions.create(
            model=MODEL, messages=LONG_PROMPT, max_tokens=60, temperature=0
        )
        .choices[0]
        .message.content
    )
    stop = full[20:24]
    assert stop.strip(), f"pick another stop in {full!r}"
    for stream in (False, True):
        reply = client.chat.completions.create(
            model=MODEL,
            messages=LONG_PROMPT,
            max_tokens=60,
            temperature=0,
            stop=[stop],
            stream=stream,
        )
        if stream:
            chunks = list(reply)
            text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
            reason = chunks[-1].choices[0].finish_reason
        else:
            text, reason = reply.choices[0].message.content, reply.choices[0].finish_reason
        assert text == full[: full.index(stop)] and reason == "stop"


def test_raw_completions_whole_and_streamed(server: ServerProcess) -> None:
    client = client_for(server)
    whole = client.completions.create(
        model=MODEL, prompt="def main():", max_tokens=16, temperature=0
    )
    assert whole.choices[0].text and whole.model_extra["mtp"]["depth"] == "auto"
    streamed = list(
        client.completions.create(
            model=MODEL, prompt="def main():", max_tokens=16, temperature=0, stream=True
        )
    )
    assert "".join(chunk.choices[0].text for chunk in streamed) == whole.choices[0].text
    assert all(chunk.usage is None for chunk in streamed), "usage was sent without being asked"
    assert streamed[-1].model_extra["mtp"]["generated_tokens"] == whole.usage.completion_tokens


def test_four_concurrent_requests_all_get_their_own_full_reply(server: ServerProcess) -> None:
    client = client_for(server)
    prompts = [f"Tell me about the number {n}." for n in range(4)]

    def ask(prompt: str) -> str:
        reply = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=24,
            temperature=0,
        )
        return reply.choices[0].message.content

    alone = [ask(prompt) for prompt in prompts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(ask, prompts))
    assert together == alone, "concurrent requests mixed up or changed the replies"
    assert len(set(alone)) > 1


def test_client_disconnect_cancels_the_generation(server: ServerProcess) -> None:
    cancelled_before = metric(server, "mtp_studio_generations_total", 'finish_reason="cancelled"')
    stream = client_for(server).chat.completions.create(
        model=MODEL, messages=LONG_PROMPT, max_tokens=4000, temperature=0, stream=True
    )
    received = 0
    for chunk in stream:
        received += bool(chunk.choices and chunk.choices[0].delta.content)
        if received == 3:
            break
    stream.close()  # what a user's Ctrl-C or a closed browser tab does to the connection
    closed_at = time.monotonic()
    # 4000 tokens take 7 s or more here; a cancel ends the generation within a second or two.
    while metric(server, "mtp_studio_generations_total", 'finish_reason="cancelled"') == (
        cancelled_before
    ):
        assert time.monotonic() - closed_at < 10, "the generation kept running after the disconnect"
        time.sleep(0.1)
    assert httpx2.get(f"{server.root_url}/health").json()["generating"] is False
    server.wait_for_line(r"POST /v1/chat/completions 499 .*client disconnected")


def test_client_giving_up_on_a_whole_reply_cancels_it(server: ServerProcess) -> None:
    cancelled_before = metric(server, "mtp_studio_generations_total", 'finish_reason="cancelled"')
    impatient = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=0.5)
    with pytest.raises(openai.APITimeoutError):  # the client closes the connection
        impatient.chat.completions.create(
            model=MODEL, messages=LONG_PROMPT, max_tokens=4000, temperature=0
        )
    gave_up_at = time.monotonic()
    while metric(server, "mtp_studio_generations_total", 'finish_reason="cancelled"') == (
        cancelled_before
    ):
        assert time.monotonic() - gave_up_at < 10, "the whole reply kept generating"
        time.sleep(0.1)


def test_metrics_count_requests_tokens_and_acceptance_by_depth(server: ServerProcess) -> None:
    before = metric(server, "mtp_studio_generated_tokens_total")
    reply = client_for(server).chat.completions.create(
        model=MODEL, messages=PROMPT, max_tokens=16, temperature=0, extra_body=FIXED
    )
    assert metric(server, "mtp_studio_generated_tokens_total") - before == (
        reply.usage.completion_tokens
    )
    drafted = metric(server, "mtp_studio_draft_tokens_total", 'depth="1"')
    accepted = metric(server, "mtp_studio_draft_tokens_accepted_total", 'depth="1"')
    assert drafted > 0 and 0 <= accepted <= drafted
    assert metric(server, "mtp_studio_requests_total", 'endpoint="chat_completions",status="200"')
    assert metric(server, "mtp_studio_decode_tokens_per_second") > 0
    assert "mtp_studio_queue_length 0.0" in httpx2.get(f"{server.root_url}/metrics").text


def test_a_second_turn_reuses_the_conversation_and_reports_it(server: ServerProcess) -> None:
    """The next turn of a chat prefills only what is new: usage says how many prompt tokens were
    cached (OpenAI's ``prompt_tokens_details.cached_tokens``), /metrics counts them and shows the
    memory the kept states hold, and a conversation displaced by another comes back with the
    same reply (temperature 0)."""
    client = client_for(server)
    messages = [
        {"role": "system", "content": "You are a patient teacher of the history of the sea."},
        {"role": "user", "content": "Tell me about the tides, and why there are two a day."},
    ]
    first = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=24, temperature=0, extra_body=FIXED
    )
    cached_before = metric(server, "mtp_studio_prompt_tokens_cached_total")
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And the moon?"},
    ]
    second = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=24, temperature=0, extra_body=FIXED
    )
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= first.usage.prompt_tokens
    assert second.usage.prompt_tokens - cached < 20
    assert metric(server, "mtp_studio_prompt_tokens_cached_total") - cached_before == cached
    assert metric(server, "mtp_studio_kept_state_bytes") > 0

    # Another conversation takes the model, then this one comes back: the same reply.
    client.chat.completions.create(
        model=MODEL, messages=LONG_PROMPT, max_tokens=8, temperature=0, extra_body=FIXED
    )
    again = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=24, temperature=0, extra_body=FIXED
    )
    assert again.choices[0].message.content == second.choices[0].message.content


def test_server_listens_on_loopback_only(server: ServerProcess) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    port_hex = f"{server.port:04X}"
    listening = [
        line.split()[1]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if line.split()[1].endswith(f":{port_hex}") and line.split()[3] == "0A"  # LISTEN
    ]
    assert listening == [f"0100007F:{port_hex}"], listening  # 127.0.0.1 in /proc's byte order


def test_request_log_has_one_line_per_generation_with_acceptance(server: ServerProcess) -> None:
    client_for(server).chat.completions.create(
        model=MODEL, messages=PROMPT, max_tokens=5, temperature=0
    )
    line = server.wait_for_line(r"POST /v1/chat/completions 200 .*\+5 tokens \(length\)")
    assert "tok/s" in line and "acceptance" in line
