"""``POST /v1/messages/count_tokens`` on a long conversation: how long it takes, alone and while
the model is busy generating another reply.

``python bench/bench_count_tokens.py [--tokens 10000] [--repeats 5] [--model PATH]``

Starts ``serve`` in another process (as a user would) with a context large enough for the
prompt, builds a conversation of about ``--tokens`` tokens (with a tool, as Claude Code sends),
and prints the median and slowest time of ``count_tokens`` on it: first with the server idle,
then while another client streams a long reply (Claude Code counts tokens while its agent
works). Both rows are measured in one run, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anthropic import Anthropic  # noqa: E402
from openai import OpenAI  # noqa: E402

from tests.server.server_process import running_server  # noqa: E402

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "hex",
]
LONG = {
    "type": "object",
    "properties": {"story": {"type": "string", "minLength": 30_000}},
    "required": ["story"],
}
TOOL = {
    "name": "read_file",
    "description": "Read a file of the project",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def conversation(words: int, variant: int = 0) -> list[dict[str, str]]:
    """About ``words`` words; each ``variant`` starts differently, so no server keeps a prefix
    of it from an earlier request."""
    text = f"Note {variant}: " + " ".join(WORDS[index % len(WORDS)] for index in range(words))
    return [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "I read it."},
        {"role": "user", "content": "Summarise it."},
    ]


def timed_counts(client: Anthropic, words: int, repeats: int, first: int) -> list[float]:
    seconds = []
    for variant in range(first, first + repeats):
        messages = conversation(words, variant)
        started = time.perf_counter()
        client.messages.count_tokens(model="demo", messages=messages, tools=[TOOL])
        seconds.append(time.perf_counter() - started)
    return seconds


def busy_reply(client: OpenAI, stop: threading.Event) -> None:
    """Streams long replies until ``stop`` is set, so the model is generating throughout (the
    schema holds the tiny demo model to a long answer instead of its usual few words)."""
    while not stop.is_set():
        stream = client.chat.completions.create(
            model="demo",
            max_tokens=20_000,
            messages=[{"role": "user", "content": "Tell me a very long story."}],
            response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": LONG}},
            stream=True,
        )
        for _ in stream:
            if stop.is_set():
                stream.close()
                break


def row(label: str, seconds: list[float]) -> str:
    return (
        f"{label:<34} median {statistics.median(seconds) * 1000:9.1f} ms   "
        f"slowest {max(seconds) * 1000:9.1f} ms   ({len(seconds)} runs)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", type=Path)
    args = parser.parse_args()
    context = 1 << (args.tokens * 2).bit_length()
    serve_args = ["--ctx", str(context), "--mtp-depth", "2", "--alias", "demo"]
    if args.model is not None:
        serve_args += ["--model", str(args.model)]
    with running_server(*serve_args) as server:
        client = Anthropic(base_url=server.root_url, api_key="unused", max_retries=0, timeout=600)
        words = args.tokens
        for _ in range(3):  # scale the words to the tokenizer's words per token
            messages = conversation(words, -1)
            counted = client.messages.count_tokens(model="demo", messages=messages, tools=[TOOL])
            words = max(1, words * args.tokens // counted.input_tokens)
        print(f"conversations of about {counted.input_tokens} tokens (context {context})")
        idle = timed_counts(client, words, args.repeats, first=0)
        stop = threading.Event()
        openai = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=600)
        generating = threading.Thread(target=busy_reply, args=(openai, stop), daemon=True)
        generating.start()
        time.sleep(1.0)
        busy = timed_counts(client, words, args.repeats, first=args.repeats)
        stop.set()
        generating.join(timeout=60)
        print(row("count_tokens, server idle", idle))
        print(row("count_tokens, while generating", busy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
