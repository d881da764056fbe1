"""``mtp-studio chat --endpoint URL``: the chat command against a remote OpenAI-compatible server.

Kept apart from :mod:`app.commands.chat` (which drives the local runtime) and called from it: the
same options, the same conversation commands (``/reset``, ``/exit``, Ctrl-C stops the answer),
streamed text on stdout, and on stderr the reply's figures with the acceptance the server reports
(MTP Studio's statistics, llama-server's timings or vLLM's counters) or a line saying it reports
none. Not a subcommand of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from app.commands.chat_session import converse
from app.engine.errors import RemoteError
from app.engine.remote.client import RemoteEndpoint, RemoteReply
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.terminal import printable

API_KEY_VARIABLE = "MTP_STUDIO_REMOTE_API_KEY"
NO_ACCEPTANCE = "acceptance: the server does not report it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        help="chat with a remote OpenAI-compatible server instead (e.g. http://host:8000/v1)",
    )
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"the remote server's key (or set {API_KEY_VARIABLE}); only with --endpoint",
    )
    parser.add_argument(
        "--remote-model", metavar="NAME", help="the remote model (default: the server's first)"
    )


def run_remote(args: argparse.Namespace, sampler: SamplerSettings) -> int:
    if args.model is not None:
        raise RemoteError("--model and --endpoint exclude each other: use --remote-model NAME")
    key = args.api_key or os.environ.get(API_KEY_VARIABLE) or None
    with RemoteEndpoint(args.endpoint, api_key=key, model=args.remote_model) as endpoint:
        model = endpoint.model()
        if not args.json:
            print(printable(f"{model} at {endpoint.url} (remote)"), file=sys.stderr)
        return converse(args, lambda messages: _answer(endpoint, args, sampler, messages).text)


def _answer(
    endpoint: RemoteEndpoint,
    args: argparse.Namespace,
    sampler: SamplerSettings,
    messages: list[ChatMessage],
) -> RemoteReply:
    stream = endpoint.chat(messages, sampler, args.max_tokens)
    try:
        for piece in stream:
            if not args.json:
                sys.stdout.write(printable(piece, multiline=True))
                sys.stdout.flush()
    except KeyboardInterrupt:
        stream.cancel()
    reply = stream.wait()
    if args.json:
        print(json.dumps({"model": endpoint.model(), "endpoint": endpoint.url, **reply.to_dict()}))
    else:
        print(file=sys.stdout, flush=True)
        print(printable(format_reply(reply)), file=sys.stderr)
    return reply


def format_reply(reply: RemoteReply) -> str:
    tokens = "?" if reply.completion_tokens is None else str(reply.completion_tokens)
    parts = [
        f"{tokens} tokens ({reply.finish_reason})",
        f"{reply.decode_tokens_per_second:.1f} tok/s",
        f"TTFT {reply.seconds_to_first_token * 1000:.0f} ms",
        reply.acceptance.describe() if reply.acceptance else NO_ACCEPTANCE,
    ]
    return " · ".join(parts)
