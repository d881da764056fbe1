"""A hostile or careless client cannot hold or confuse the server: bodies past ``--max-body-mib``
get a 413 while still arriving, echoed values are cut short without control characters (a
newline cannot forge a log line), a client that leaves while queued frees its place at once,
and an upload dropped halfway is one quiet log line, not a traceback."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import anthropic
import httpx2
import pytest
from openai import OpenAI

from tests.server.conftest import API_KEY
from tests.server.long_reply import LONG
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

HELLO = [{"role": "user", "content": "Hello"}]
STORY = [{"role": "user", "content": "Write a long story about a dragon."}]
LIMIT = 2**20  # the limits server runs with --max-body-mib 1


JSON = {"content-type": "application/json"}


def oversized_body() -> bytes:
    filler = "a" * (LIMIT + 1000)
    return b'{"messages": [{"role": "user", "content": "' + filler.encode() + b'"}]}'


def test_a_body_past_the_cap_is_a_413_whether_or_not_its_length_is_declared(
    limits_server: ServerProcess,
) -> None:
    url = f"{limits_server.base_url}/chat/completions"
    declared = httpx2.post(url, content=oversized_body(), headers=JSON)
    assert declared.status_code == 413
    error = declared.json()["error"]
    assert error["code"] == "request_too_large" and "--max-body-mib" in error["message"]

    def chunked() -> object:  # no Content-Length: the cap is checked as the pieces arrive
        body = oversized_body()
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    streamed = httpx2.post(url, content=chunked(), headers=JSON)
    assert streamed.status_code == 413
    anthropic_client = anthropic.Anthropic(
        base_url=limits_server.root_url, api_key="unused", max_retries=0
    )
    with pytest.raises(anthropic.APIStatusError) as caught:
        anthropic_client.messages.create(
            model="demo-mtp",
            max_tokens=4,
            messages=[{"role": "user", "content": "a" * (LIMIT + 10)}],
        )
    assert caught.value.status_code == 413
    assert caught.value.body["error"]["type"] == "request_too_large"
    small = httpx2.post(url, json={"messages": HELLO, "max_tokens": 2})
    assert small.status_code == 200, "the server kept working after refusing large bodies"


def test_echoed_values_are_short_and_cannot_forge_log_lines(server: ServerProcess) -> None:
    url = f"{server.base_url}/chat/completions"
    huge = httpx2.post(url, json={"messages": HELLO, "temperature": "9" * 100_000})
    assert huge.status_code == 400
    message = huge.json()["error"]["message"]
    assert message.startswith("'temperature' must be a number") and len(message) < 200
    forged = "robot\nPOST /v1/forged 200 1 ms\u2028"
    bad_role = httpx2.post(url, json={"messages": [{"role": forged, "content": "x"}]})
    assert bad_role.status_code == 400
    assert "\n" not in bad_role.json()["error"]["message"]
    line = server.wait_for_line(r"400 .*'messages\[0\]\.role' is \"robot")
    assert len(line) < 400
    assert not any(line.startswith("POST /v1/forged") for line in server.lines)


def test_json_nested_past_the_parsers_depth_is_a_400(server: ServerProcess) -> None:
    for path in ("/v1/chat/completions", "/v1/messages"):
        deep = httpx2.post(f"{server.root_url}{path}", content=b"[" * 200_000, headers=JSON)
        assert deep.status_code == 400, deep.text
        assert "nested too deeply" in deep.text


def test_a_client_that_leaves_while_queued_frees_its_place(keyed_server: ServerProcess) -> None:
    client = OpenAI(base_url=keyed_server.base_url, api_key=API_KEY, max_retries=0, timeout=120)
    health = f"{keyed_server.root_url}/health"
    running = client.chat.completions.create(
        model="demo-mtp",
        messages=STORY,
        max_tokens=4000,
        temperature=0,
        stream=True,
        response_format=LONG,  # still running when the second request comes and goes
    )
    next(iter(running))  # its headers came: it may still wait for the worker a moment
    started = time.monotonic() + 10
    while not httpx2.get(health).json()["generating"]:
        assert time.monotonic() < started, "the first request never started generating"
        time.sleep(0.02)
    try:  # it runs now; the queue (one place) is empty
        with pytest.raises(httpx2.TimeoutException):  # waits in the queue, then gives up
            httpx2.post(
                f"{keyed_server.base_url}/chat/completions",
                json={"messages": HELLO, "max_tokens": 2},
                headers={"authorization": f"Bearer {API_KEY}"},
                timeout=1.0,
            )
        deadline = time.monotonic() + 5
        while httpx2.get(health).json()["queue_length"] != 0:
            assert time.monotonic() < deadline, "the departed client kept its place in the queue"
            time.sleep(0.05)
        assert httpx2.get(health).json()["generating"], "the first request was still running"
        # its place is free: another request queues instead of getting a 503
        with ThreadPoolExecutor(max_workers=1) as pool:
            queued = pool.submit(
                client.chat.completions.create, model="demo-mtp", messages=HELLO, max_tokens=2
            )
            while httpx2.get(health).json()["queue_length"] != 1:
                assert time.monotonic() < deadline + 5 and not queued.done(), "it never queued"
                time.sleep(0.05)
            running.close()
            assert queued.result(timeout=30).choices[0].message.content
    finally:
        running.close()
    keyed_server.wait_for_line(r"POST /v1/chat/completions 499 .*client disconnected")


def test_an_upload_dropped_halfway_is_one_quiet_log_line(limits_server: ServerProcess) -> None:
    before = len(limits_server.lines)
    with socket.create_connection(("127.0.0.1", limits_server.port)) as connection:
        connection.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            b'{"messages": [{"role": "user", "content": "'
        )
        time.sleep(0.3)
    limits_server.wait_for_line(r"POST /v1/chat/completions 499 .*client disconnected")
    time.sleep(0.5)  # anything else it would write about that request comes now
    later = "".join(limits_server.lines[before:])
    assert "Traceback" not in later and "ClientDisconnect" not in later, later
    assert len(limits_server.lines[before:]) == 1, later
