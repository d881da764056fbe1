"""The conversation loop of ``mtp-studio chat``, the same for a local model and a remote server.

``--prompt`` answers one message; otherwise lines are read until end of input or ``/exit``,
``/reset`` forgets the conversation (keeping the ``--system`` message). Only how one answer is
produced differs between the local runtime and ``--endpoint``, so that is passed in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from app.engine.runtime.chat_format.prompting import ChatMessage

Answer = Callable[[list[ChatMessage]], str]
"""Answers a conversation (streaming it to the terminal) and returns the reply's text."""


def converse(args: argparse.Namespace, answer: Answer) -> int:
    history = [ChatMessage("system", args.system)] if args.system else []
    if args.prompt is not None:
        answer([*history, ChatMessage("user", args.prompt)])
        return 0
    start = list(history)
    if not args.json:
        print("Type a message; /reset forgets the conversation, /exit quits.", file=sys.stderr)
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except (EOFError, KeyboardInterrupt):
            return 0
        command = line.strip()
        if command in ("/exit", "/quit"):
            return 0
        if command == "/reset":
            history = list(start)
        elif command:
            history.append(ChatMessage("user", line))
            history.append(ChatMessage("assistant", answer(history)))
