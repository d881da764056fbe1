"""The conversation loop of ``mtp-studio chat``, the same for a local model and a remote server.

``--prompt`` answers one message; otherwise lines are read until end of input or ``/exit``,
``/reset`` forgets the conversation (keeping the ``--system`` message), ``/image FILE`` attaches a
picture to the next message (``--image FILE`` to the first). Only how one answer is produced
differs between the local runtime and ``--endpoint``, so that is passed in.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app.engine.chat.attachments import placed_first, read_attachment
from app.engine.errors import ImageError
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.chat_format.prompting import ChatMessage

IMAGE_COMMAND = "/image "

Answer = Callable[[list[ChatMessage]], str]
"""Answers a conversation (streaming it to the terminal) and returns the reply's text."""


def user_message(text: str, images: Sequence[ImagePart]) -> ChatMessage:
    """A user turn with ``images`` shown before its text."""
    return ChatMessage("user", text, images=placed_first(images))


def converse(args: argparse.Namespace, answer: Answer) -> int:
    history = [ChatMessage("system", args.system)] if args.system else []
    attached = [read_attachment(path) for path in getattr(args, "image", None) or ()]
    if args.prompt is not None:
        answer([*history, user_message(args.prompt, attached)])
        return 0
    start = list(history)
    if not args.json:
        print(
            "Type a message; /image FILE attaches a picture to the next one, /reset forgets the "
            "conversation, /exit quits.",
            file=sys.stderr,
        )
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except (EOFError, KeyboardInterrupt):
            return 0
        command = line.strip()
        if command in ("/exit", "/quit"):
            return 0
        if command == "/reset":
            history, attached = list(start), []
        elif command.startswith(IMAGE_COMMAND):
            try:
                attached.append(read_attachment(Path(command[len(IMAGE_COMMAND) :].strip())))
            except ImageError as exc:
                print(f"error: {exc}", file=sys.stderr)
        elif command:
            history.append(user_message(line, attached))
            attached = []
            history.append(ChatMessage("assistant", answer(history)))
