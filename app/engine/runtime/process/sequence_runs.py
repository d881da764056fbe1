"""The worker's generations when its model decodes several sequences at once (``serve
--parallel N`` on llama.cpp).

Each started generation runs on a thread of its own with a free sequence of the model
(:class:`~app.engine.runtime.backends.llama_cpp.sequences.SequenceBackend`), while the worker's
main thread keeps reading the pipe: a new request starts beside the running ones, and a cancel
or a shutdown sets the flag its generation reads after every cycle, so a client that went away
frees its sequence within one step. The decodes of the running sequences are merged into one
batch per step by the backend (:mod:`app.engine.runtime.backends.llama_cpp.step_gate`). Each
sequence keeps its own depth policy (the adaptive depth learns the cost of a batched cycle).

A request goes to the free sequence that keeps the longest prefix of its prompt (its
conversation's earlier turns), else to the one used least recently, so each client's next turn
finds its conversation where it left it (docs/architecture.md#kept-states).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.errors import MtpStudioError
from app.engine.runtime.core.backend import DecodeBackend
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.process.messages import (
    ChunkMessage,
    GenerationFinished,
    StartGeneration,
    WorkerFailure,
)
from app.engine.runtime.speculative.depth_policy import DepthPolicies
from app.engine.runtime.speculative.generation import generate, prompt_tokens


@dataclass(eq=False)
class _Slot:
    """A sequence, its depth policy and when it last ended a request."""

    backend: DecodeBackend
    policies: DepthPolicies
    used_at: float = 0.0

    def reuse(self, tokens: Sequence[int]) -> int:
        """Prompt tokens of ``tokens`` this sequence would not compute again."""
        if not tokens:
            return 0
        return max(self.backend.reusable_prefix(tokens, with_mtp=way) for way in (True, False))


class SequenceRuns:
    """Runs generations on ``sequences`` at once; ``send`` posts a message to the client (from
    any thread: it must be thread-safe)."""

    def __init__(
        self,
        sequences: Sequence[DecodeBackend],
        send: Callable[[object], None],
        chunk_interval: float,
    ) -> None:
        self._free = [_Slot(sequence, DepthPolicies()) for sequence in sequences]
        self._freed = threading.Condition()
        self._send = send
        self._chunk_interval = chunk_interval
        self._cancels: dict[int, threading.Event] = {}
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def start(self, message: StartGeneration) -> None:
        """Run ``message``'s generation on the next free sequence (waiting for one if all run)."""
        cancel = threading.Event()
        thread = threading.Thread(
            target=self._run,
            args=(message, cancel),
            name=f"mtp-studio-sequence {message.request_id}",
            daemon=True,
        )
        with self._lock:
            self._cancels[message.request_id] = cancel
            self._threads.add(thread)
        thread.start()

    def cancel(self, request_id: int) -> None:
        with self._lock:
            cancel = self._cancels.get(request_id)
        if cancel is not None:
            cancel.set()

    def stop(self) -> None:
        """Cancel every generation and wait for their threads."""
        with self._lock:
            cancels = list(self._cancels.values())
            threads = list(self._threads)
        for cancel in cancels:
            cancel.set()
        for thread in threads:
            thread.join(timeout=30)

    def _run(self, message: StartGeneration, cancel: threading.Event) -> None:
        """Run the generation, hand its sequence back, then answer: a client that sends its
        next turn the moment this one ends finds the sequence that keeps its conversation
        free."""
        request_id = message.request_id
        slot = self._take(message.request)
        answer: object
        try:
            answer = GenerationFinished(request_id, self._generate(slot, message, cancel))
        except MtpStudioError as exc:
            answer = WorkerFailure(request_id, str(exc), user_error=True)
        except Exception:
            answer = WorkerFailure(request_id, traceback.format_exc(), user_error=False)
        finally:
            slot.used_at = time.monotonic()
            with self._freed:
                self._free.append(slot)
                self._freed.notify_all()
            with self._lock:
                self._cancels.pop(request_id, None)
                self._threads.discard(threading.current_thread())
        self._send(answer)

    def _take(self, request: GenerationRequest) -> _Slot:
        """The free sequence that keeps most of ``request``'s prompt (waiting for one if all
        run); on a tie the least recently used."""
        with self._freed:
            while not self._free:
                self._freed.wait()
            try:
                tokens = prompt_tokens(self._free[0].backend, request)
            except Exception:  # a bad request: generate reports it; any sequence will do
                tokens = []
            slot = max(self._free, key=lambda free: (free.reuse(tokens), -free.used_at))
            self._free.remove(slot)
            return slot

    def _generate(
        self, slot: _Slot, message: StartGeneration, cancel: threading.Event
    ) -> GenerationResult:
        request_id = message.request_id

        def send(chunk: TokenChunk) -> None:
            self._send(ChunkMessage(request_id, chunk))

        with slot.backend.running():
            result = generate(
                slot.backend,
                message.request,
                emit=send,
                cancelled=cancel.is_set,
                depth_policies=slot.policies,
                chunk_interval=self._chunk_interval,
            )
        if message.request.adaptive_depth:
            slot.policies.save()
        return result
