"""A separate process that writes a streaming reply into the chat history, for crash tests.

``python -m tests.chat.history_writer DB MODEL crash``: streams a long reply from the tiny model
through the real worker and :class:`ReplyRecorder`, printing every chunk it received (time and
text, one JSON line each), then kills itself with SIGKILL after ``STREAM_SECONDS`` — an app
crash mid-reply. ``... DB - hold``: starts a reply, prints ``READY`` and waits to be killed — an
app instance that is alive while another opens the history.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from app.engine.chat.conversation import ChatSettings
from app.engine.chat.history import HistoryStore
from app.engine.chat.recorder import ReplyRecorder
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient

STREAM_SECONDS = 1.5


def _emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def main() -> None:
    database, model, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    store = HistoryStore(database)
    conversation = store.create_conversation("crash test", ChatSettings())
    store.add_user_message(conversation, "Write a long story")
    reply = store.start_reply(conversation, "tiny-mtp.gguf")
    _emit({"message_id": reply.id})
    if mode == "hold":
        store.save_partial(reply.id, "partial text of a live session", None)
        print("READY", flush=True)
        time.sleep(600)
        return
    recorder = ReplyRecorder(store, reply.id)
    client = RuntimeClient(Path(model), settings=LoadSettings(threads=1, context_length=4096))
    client.load()
    stream = client.start(GenerationRequest(prompt="Once upon a time", max_tokens=4000))
    started = time.monotonic()
    for chunk in stream:
        recorder.add(chunk)
        _emit({"at": time.monotonic(), "text": chunk.text})
        if time.monotonic() - started >= STREAM_SECONDS:
            _emit({"killed_at": time.monotonic()})
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
