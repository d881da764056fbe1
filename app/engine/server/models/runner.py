"""What runs a loaded model's generations, as the server's scheduler sees it: how many at once.

The scheduler (:mod:`app.engine.server.core.scheduler`) asks a :class:`ModelRunner` how many
generations it can run at once (:attr:`ModelRunner.sequences`) and starts up to that many; each
:meth:`~ModelRunner.start` returns its own stream. The runner is one worker process
(:class:`WorkerRunner`): a llama.cpp model loaded for N sequences decodes N generations at once
in one context with continuous batching and reports N; an MLX model runs one at a time
(docs/server-api.md#several-clients).
A runner also holds the model's :class:`PromptCounter` (its tokenizer and chat template, opened
with the model and closed with it), which counts prompts in the server's process.
"""

from __future__ import annotations

from typing import Protocol

from app.engine.chat.context_choice import LoadPlan
from app.engine.runtime.core.backend import ModelInfo
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import GenerationStream, RuntimeClient
from app.engine.runtime.process.prompt_counter import PromptCounter


class ModelRunner(Protocol):
    """A loaded model that generations can be started on."""

    @property
    def info(self) -> ModelInfo: ...

    @property
    def plan(self) -> LoadPlan: ...

    @property
    def counter(self) -> PromptCounter:
        """Counts the model's prompts without its worker."""
        ...

    @property
    def sequences(self) -> int:
        """How many generations may run at once (their streams are read concurrently)."""
        ...

    def start(self, request: GenerationRequest) -> GenerationStream: ...

    def worker_pids(self) -> tuple[int, ...]:
        """The processes that hold the model (their memory is the model's)."""
        ...

    def close(self) -> None: ...


class WorkerRunner:
    """One inference worker process (:class:`RuntimeClient`): as many generations at once as
    its model was loaded for."""

    def __init__(
        self, client: RuntimeClient, info: ModelInfo, plan: LoadPlan, counter: PromptCounter
    ) -> None:
        self._client = client
        self._info = info
        self._plan = plan
        self._counter = counter

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def plan(self) -> LoadPlan:
        return self._plan

    @property
    def counter(self) -> PromptCounter:
        return self._counter

    @property
    def sequences(self) -> int:
        return self._info.sequences

    def start(self, request: GenerationRequest) -> GenerationStream:
        return self._client.start(request)

    def worker_pids(self) -> tuple[int, ...]:
        pid = self._client.worker_pid
        return (pid,) if pid is not None else ()

    def close(self) -> None:
        self._counter.close()
        self._client.close()
