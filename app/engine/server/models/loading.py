"""How each model of the library is loaded: its load settings and memory estimate, and its worker.

Every model gets the load options ``serve`` was started with (``--ctx``, ``--kv-type``,
``--flash-attn``, ``--state-cache-mib``, ``--threads``), planned for it as the chat window plans
a load (:func:`~app.engine.chat.context_choice.plan_load`: with ``--ctx 0``, the largest context
that fits this machine). A ``--kv-type`` a model cannot use falls back to f16 for that model (the
load's log line says so) instead of refusing the whole library. The plan's memory estimate, plus
what a worker process itself takes, is what the pool's budget counts (:mod:`.pool`).

A GGUF model on llama.cpp is loaded for ``--parallel N`` sequences (N requests decoded at once in
one context, docs/server-api.md#several-clients): its KV cache and recurrent states are held N
times, which the estimate counts. Without ``--parallel`` N is chosen by memory: the most, up to
:data:`MOST_SEQUENCES`, whose estimate stays within half of the RAM, and never fewer than
2. With ``--ctx 0`` (the context chosen for the machine) a context whose N windows would not fit
where one was chosen to fit is halved until they do (not below the runtime's default 4096). An
MLX model runs one request at a time.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from app.engine.chat.context_choice import FIT_SHARE, ContextChoice, LoadPlan, plan_load
from app.engine.chat.memory import RUNTIME_DEFAULT_CONTEXT, MemoryEstimate, estimate_memory
from app.engine.load_options import LoadOptions
from app.engine.runtime.backends.choice import MLX, choose_backend
from app.engine.runtime.core.backend import ModelInfo
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.process.prompt_counter import PromptCounter
from app.engine.server.models.catalogue import ServableModel
from app.engine.server.models.runner import ModelRunner, WorkerRunner

MOST_SEQUENCES = 4
"""The most sequences ``--parallel``'s default gives a model (llama-server's default too)."""
LEAST_SEQUENCES = 2
"""The fewest: a second client (a coding agent's sub-agent, a title request) never waits for a
whole reply."""
WORKER_PROCESS_BYTES = 128 * 2**20
"""What an inference worker process holds besides its model (Python, numpy, llama.cpp): a demo
worker's resident memory is 130-150 MB with its model and caches (bench serve prints it)."""


@dataclass(frozen=True)
class LoadRules:
    """What every model is loaded with; ``backend``: ``auto`` for the library (llama.cpp for a
    GGUF, MLX for a folder), or the one ``serve --backend`` names for a pinned model; images:
    the projector beside each GGUF model unless ``projector`` names one or ``images`` is off;
    drafting: the drafter paired with each model unless ``drafter`` names one."""

    options: LoadOptions
    max_draft_depth: int
    memory_bytes: int | None
    backend: str = "auto"
    projector: Path | None = None
    """The vision projector ``--mmproj`` names (a pinned model's); None: the one beside each
    GGUF model, if any."""
    images: bool = True
    """False (``--mmproj none``): every model reads text only."""
    drafter: Path | None = None
    """The drafter ``--drafter`` names (a pinned model's); None: the one the library pairs with
    each model, if any."""
    parallel: int = 0
    """Sequences per llama.cpp model (``--parallel``); 0: chosen by memory."""


class RunnerFactory:
    """Plans and opens runners; remembers each model's plan and the info of its last load."""

    def __init__(self, rules: LoadRules) -> None:
        self.rules = rules
        self._plans: dict[str, LoadPlan] = {}
        self._infos: dict[str, ModelInfo] = {}
        self._lock = threading.Lock()

    def plan(self, model: ServableModel) -> LoadPlan:
        with self._lock:
            plan = self._plans.get(model.id)
        if plan is None:
            plan = plan_load(
                model.description,
                self.rules.options,
                memory_bytes=self.rules.memory_bytes,
                max_draft_depth=self.rules.max_draft_depth,
            )
            settings = dataclasses.replace(
                plan.settings,
                projector=self.rules.projector,
                images=self.rules.images,
                drafter=self.rules.drafter or plan.settings.drafter,
            )
            plan = self._with_sequences(model, dataclasses.replace(plan, settings=settings))
            with self._lock:
                self._plans[model.id] = plan
        return plan

    def _with_sequences(self, model: ServableModel, plan: LoadPlan) -> LoadPlan:
        """``plan`` for as many sequences as the model runs at once, its caches counted that
        many times."""
        if not model.is_gguf or choose_backend(self.rules.backend, model.path).name == MLX:
            return plan
        count = self.rules.parallel or sequences_by_memory(plan.memory, self.rules.memory_bytes)
        if plan.memory is None:
            return dataclasses.replace(plan, settings=replace(plan.settings, sequences=count))
        choice, memory = self._fit_windows(model, plan, count)
        settings = replace(plan.settings, sequences=count, context_length=choice.context)
        return dataclasses.replace(plan, settings=settings, memory=memory, choice=choice)

    def _fit_windows(
        self, model: ServableModel, plan: LoadPlan, count: int
    ) -> tuple[ContextChoice, MemoryEstimate]:
        """The context and memory of ``count`` sequences: with ``--ctx 0`` (the context was
        chosen for this machine), halved while ``count`` windows would not fit where one was
        chosen to fit, down to the runtime's default."""
        assert plan.memory is not None
        choice, memory = plan.choice, _times(plan.memory, count)
        ram, shape = self.rules.memory_bytes, model.description.shape
        if self.rules.options.context_length or not ram or shape is None:
            return choice, memory
        context = plan.memory.context
        while memory.total_bytes > FIT_SHARE * ram and context > RUNTIME_DEFAULT_CONTEXT:
            context //= 2
            single = estimate_memory(
                plan.memory.weights_bytes,
                shape,
                with_mtp=model.description.mtp_blocks > 0 and model.description.mtp_note is None,
                context=context,
                kv_cache_type=plan.memory.kv_cache_type,
                state_cache_mib=self.rules.options.state_cache_mib,
            )
            memory = _times(single, count)
            choice = ContextChoice(context, f"the largest that fits this machine {count} times")
        return choice, memory

    def estimate_bytes(self, model: ServableModel) -> int:
        """The memory the model is expected to hold once loaded, its worker included."""
        memory = self.plan(model).memory
        held = memory.total_bytes if memory is not None else model.size_bytes
        return held + WORKER_PROCESS_BYTES

    def known_info(self, model_id: str) -> ModelInfo | None:
        """What the model's last load reported (None before its first load)."""
        with self._lock:
            return self._infos.get(model_id)

    def open(self, model: ServableModel) -> ModelRunner:
        """Start a worker and load ``model`` in it (blocking: seconds to minutes)."""
        plan = self.plan(model)
        backend = choose_backend(self.rules.backend, model.path)
        sidecar = model.sidecar if backend.name == MLX else None
        client = RuntimeClient(
            model.path, backend=self.rules.backend, settings=plan.settings, sidecar=sidecar
        )
        try:
            info = client.load()
            counter = PromptCounter(client.choice.name, model.path)
        except BaseException:
            client.close()
            raise
        with self._lock:
            self._infos[model.id] = info
        return WorkerRunner(client, info, plan, counter)


def sequences_by_memory(memory: MemoryEstimate | None, memory_bytes: int | None) -> int:
    """The most sequences (up to :data:`MOST_SEQUENCES`) whose caches keep the model's estimate
    within half of ``memory_bytes``; at least :data:`LEAST_SEQUENCES`."""
    if memory is None or not memory_bytes:
        return LEAST_SEQUENCES
    per_sequence = memory.cache_bytes
    fixed = memory.total_bytes - per_sequence
    for count in range(MOST_SEQUENCES, LEAST_SEQUENCES, -1):
        if fixed + count * per_sequence <= memory_bytes // 2:
            return count
    return LEAST_SEQUENCES


def _times(memory: MemoryEstimate, count: int) -> MemoryEstimate:
    """``memory`` with its caches (KV, recurrent states) held ``count`` times."""
    return replace(
        memory, kv_bytes=memory.kv_bytes * count, recurrent_bytes=memory.recurrent_bytes * count
    )
