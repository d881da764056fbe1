"""The loaded models: loaded on demand, kept within a memory budget, unloaded least recently used
and after an idle time.

Each model's scheduler holds a *lease* on its model while it has requests to run
(:meth:`ModelPool.acquire` … :meth:`ModelPool.release`); a model without a lease is idle and may
be unloaded. Loading a model first makes room: idle models are unloaded, least recently used
first, until the new one fits ``--max-loaded`` and the memory budget (the models' memory
estimates, workers included; one model always loads, whatever its estimate). When the room is
held by busy models the load waits, and the least recently used of them is *wanted*: its
scheduler hands its lease back after its current request (:meth:`ModelPool.wanted`), so two
models that do not fit together take turns per request instead of one starving the other. An
idle model is unloaded after ``--idle-unload``. Every load and unload is reported as a
:class:`PoolEvent` (the server's log and ``/metrics``). docs/server-api.md#models.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from app.engine.errors import ServerError
from app.engine.runtime.core.backend import ModelInfo
from app.engine.server.models.catalogue import ServableModel
from app.engine.server.models.loading import RunnerFactory
from app.engine.server.models.runner import ModelRunner

NOT_LOADED = "not-loaded"
LOADING = "loading"
LOADED = "loaded"
UNLOADING = "unloading"

LOADING_EVENT = "model_loading"
LOADED_EVENT = "model_loaded"
LOAD_FAILED_EVENT = "model_load_failed"
UNLOADED_EVENT = "model_unloaded"

IDLE = "idle"
EVICTED = "evicted"
ADMIN = "admin"
SHUTDOWN = "shutdown"

_WAIT_SECONDS = 0.5
"""How often a load waiting for room checks that its requests still want it."""


@dataclass(frozen=True)
class PoolRules:
    """``max_loaded`` 0: no limit on the count; ``budget_bytes`` None: no memory limit;
    ``idle_unload_seconds`` 0: never unload an idle model."""

    max_loaded: int = 0
    budget_bytes: int | None = None
    idle_unload_seconds: float = 600.0


@dataclass(frozen=True)
class PoolEvent:
    """A load or unload. ``reason`` (unloads): idle, evicted (to make room for ``for_model``),
    admin or shutdown; ``message`` (failed loads): why."""

    kind: str
    model_id: str
    seconds: float = 0.0
    reason: str = ""
    for_model: str = ""
    message: str = ""
    info: ModelInfo | None = None


@dataclass(frozen=True)
class LoadedStatus:
    """One model the pool holds (or is loading), for ``/v1/status``."""

    id: str
    state: str
    sequences: int
    estimate_bytes: int
    resident_bytes: int | None
    busy: bool
    loaded_seconds_ago: float
    idle_seconds: float
    load_seconds: float
    unload_in_seconds: float | None
    info: ModelInfo | None


class _Entry:
    def __init__(self, model: ServableModel) -> None:
        self.model = model
        self.state = NOT_LOADED
        self.runner: ModelRunner | None = None
        self.leases = 0
        self.estimate = 0
        self.loaded_at = 0.0
        self.last_used = 0.0
        self.load_seconds = 0.0
        self.wanted = False


class ModelPool:
    """Loads models with ``factory`` under ``rules``; thread-safe."""

    def __init__(
        self,
        factory: RunnerFactory,
        rules: PoolRules,
        on_event: Callable[[PoolEvent], None] = lambda event: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self.rules = rules
        self._on_event = on_event
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._waiting_loads: set[str] = set()
        self._changed = threading.Condition()
        self._closed = False
        self._reaper = threading.Thread(target=self._reap, name="mtp-studio-unloader", daemon=True)

    def start(self) -> None:
        """Start unloading idle models (when ``rules.idle_unload_seconds`` is set)."""
        if self.rules.idle_unload_seconds > 0:
            self._reaper.start()

    # --- leases ------------------------------------------------------------------------------

    def acquire(
        self, model: ServableModel, still_needed: Callable[[], bool] = lambda: True
    ) -> ModelRunner | None:
        """A lease on ``model``, loading it first if needed (blocking); None when
        ``still_needed`` turns false while the load waits for room. Raises what the load
        raises."""
        with self._changed:
            entry = self._entries.setdefault(model.id, _Entry(model))
            victims = self._wait_for_turn(entry, still_needed)
            if victims is None:
                return None
            if entry.state == LOADED:
                assert entry.runner is not None
                entry.leases += 1
                entry.last_used = self._clock()
                return entry.runner
            entry.model = model  # the library may have been rescanned since
            entry.state = LOADING
            entry.estimate = self._factory.estimate_bytes(model)
            for victim in victims:
                victim.state = UNLOADING
        self._unload(victims, EVICTED, for_model=model.id)
        return self._load(entry)

    def release(self, model_id: str) -> None:
        """Hand a lease back; the model stays loaded until it is unloaded."""
        with self._changed:
            entry = self._entries[model_id]
            entry.leases -= 1
            entry.last_used = self._clock()
            if entry.leases == 0:
                self._changed.notify_all()

    def wanted(self, model_id: str) -> bool:
        """Whether another model waits for the room this one holds (hand the lease back)."""
        with self._changed:
            entry = self._entries.get(model_id)
            return entry is not None and entry.wanted and bool(self._waiting_loads)

    # --- unloading ----------------------------------------------------------------------------

    def unload(self, model_id: str) -> str:
        """Unload an idle model now: its state before (:data:`LOADED`), or why not (its state,
        or ``busy``)."""
        with self._changed:
            entry = self._entries.get(model_id)
            if entry is None or entry.state != LOADED:
                return entry.state if entry is not None else NOT_LOADED
            if entry.leases:
                return "busy"
            entry.state = UNLOADING
        self._unload([entry], ADMIN)
        return LOADED

    def close(self) -> None:
        """Unload every model (the schedulers have stopped their requests)."""
        with self._changed:
            self._closed = True
            held = [entry for entry in self._entries.values() if entry.state == LOADED]
            for entry in held:
                entry.state = UNLOADING
            self._changed.notify_all()
        self._unload(held, SHUTDOWN)

    # --- what is loaded ----------------------------------------------------------------------

    def statuses(self) -> tuple[LoadedStatus, ...]:
        now = self._clock()
        with self._changed:
            held = [e for e in self._entries.values() if e.state != NOT_LOADED]
            rows = [(entry, entry.runner) for entry in held]
        return tuple(self._status(entry, runner, now) for entry, runner in rows)

    def loaded_ids(self) -> tuple[str, ...]:
        with self._changed:
            return tuple(e.model.id for e in self._entries.values() if e.state == LOADED)

    def loaded_runner(self, model_id: str) -> ModelRunner | None:
        """The model's runner while it is loaded (None otherwise)."""
        with self._changed:
            entry = self._entries.get(model_id)
            return entry.runner if entry is not None and entry.state == LOADED else None

    def held_bytes(self) -> int:
        """The memory estimates of the models loaded or loading."""
        with self._changed:
            return sum(e.estimate for e in self._entries.values() if e.state != NOT_LOADED)

    def _status(self, entry: _Entry, runner: ModelRunner | None, now: float) -> LoadedStatus:
        idle = now - entry.last_used if entry.leases == 0 and entry.state == LOADED else 0.0
        limit = self.rules.idle_unload_seconds
        unload_in = max(0.0, limit - idle) if limit > 0 and entry.state == LOADED else None
        return LoadedStatus(
            id=entry.model.id,
            state=entry.state,
            sequences=runner.sequences if runner is not None else 0,
            estimate_bytes=entry.estimate,
            resident_bytes=_resident_bytes(runner.worker_pids()) if runner is not None else None,
            busy=entry.leases > 0,
            loaded_seconds_ago=now - entry.loaded_at if entry.state == LOADED else 0.0,
            idle_seconds=idle,
            load_seconds=entry.load_seconds,
            unload_in_seconds=unload_in if entry.leases == 0 else None,
            info=runner.info if runner is not None else None,
        )

    # --- inside -------------------------------------------------------------------------------

    def _wait_for_turn(
        self, entry: _Entry, still_needed: Callable[[], bool]
    ) -> list[_Entry] | None:
        """With the lock held: wait until ``entry`` is loaded and free to lease (→ []) or not
        loaded with room made (→ the idle models to unload for it); None once not needed."""
        model_id = entry.model.id
        try:
            while True:
                if self._closed:
                    raise ServerError("the server is shutting down")
                if entry.state == LOADED and not (entry.wanted and self._waiting_loads):
                    return []
                if entry.state == NOT_LOADED:
                    victims = self._room_for(entry)
                    if victims is not None:
                        return victims
                    self._waiting_loads.add(model_id)
                if not still_needed():
                    return None
                self._changed.wait(_WAIT_SECONDS)
        finally:
            self._waiting_loads.discard(model_id)

    def _room_for(self, entry: _Entry) -> list[_Entry] | None:
        """The idle models to unload so that ``entry`` fits (least recently used first), or
        None when it cannot fit until a busy model is done (the oldest of them is wanted)."""
        others = [e for e in self._entries.values() if e is not entry and e.state != NOT_LOADED]
        estimate = self._factory.estimate_bytes(entry.model)
        idle = sorted(
            (e for e in others if e.state == LOADED and e.leases == 0), key=lambda e: e.last_used
        )
        count, used = len(others), sum(e.estimate for e in others)
        victims: list[_Entry] = []

        def fits() -> bool:
            if count == 0:
                return True
            if self.rules.max_loaded and count + 1 > self.rules.max_loaded:
                return False
            budget = self.rules.budget_bytes
            return budget is None or used + estimate <= budget

        while not fits() and idle:
            victim = idle.pop(0)
            victims.append(victim)
            count, used = count - 1, used - victim.estimate
        if fits():
            return victims
        busy = sorted((e for e in others if e.leases > 0), key=lambda e: e.last_used)
        if busy:
            busy[0].wanted = True
        return None

    def _load(self, entry: _Entry) -> ModelRunner:
        model = entry.model
        self._on_event(PoolEvent(LOADING_EVENT, model.id))
        started = self._clock()
        try:
            runner = self._factory.open(model)
        except BaseException as exc:
            with self._changed:
                entry.state = NOT_LOADED
                self._changed.notify_all()
            self._on_event(PoolEvent(LOAD_FAILED_EVENT, model.id, message=str(exc)))
            raise
        seconds = self._clock() - started
        with self._changed:
            entry.runner, entry.state, entry.leases = runner, LOADED, 1
            entry.loaded_at = entry.last_used = self._clock()
            entry.load_seconds = seconds
            self._changed.notify_all()
        self._on_event(PoolEvent(LOADED_EVENT, model.id, seconds=seconds, info=runner.info))
        return runner

    def _unload(self, entries: list[_Entry], reason: str, for_model: str = "") -> None:
        for entry in entries:
            runner, idle = entry.runner, self._clock() - entry.last_used
            if runner is not None:
                runner.close()
            with self._changed:
                entry.runner, entry.state, entry.wanted, entry.estimate = None, NOT_LOADED, False, 0
                self._changed.notify_all()
            event = PoolEvent(
                UNLOADED_EVENT, entry.model.id, seconds=idle, reason=reason, for_model=for_model
            )
            self._on_event(event)

    def _reap(self) -> None:
        limit = self.rules.idle_unload_seconds
        interval = min(10.0, max(0.2, limit / 5))
        while True:
            with self._changed:
                if self._closed:
                    return
                now = self._clock()
                idle = [
                    entry
                    for entry in self._entries.values()
                    if entry.state == LOADED and not entry.leases and now - entry.last_used >= limit
                ]
                for entry in idle:
                    entry.state = UNLOADING
            self._unload(idle, IDLE)
            with self._changed:
                if not self._closed:
                    self._changed.wait(interval)


def _resident_bytes(pids: tuple[int, ...]) -> int | None:
    """The resident memory of the model's worker processes (None where it cannot be read)."""
    total = 0
    try:
        for pid in pids:
            total += psutil.Process(pid).memory_info().rss
    except (psutil.Error, OSError):
        return None
    return total


class PoolLease:
    """One model's side of the pool, as its scheduler uses it."""

    def __init__(self, pool: ModelPool, model: ServableModel) -> None:
        self._pool = pool
        self.model = model

    def acquire(self, still_needed: Callable[[], bool]) -> ModelRunner | None:
        return self._pool.acquire(self.model, still_needed)

    def release(self) -> None:
        self._pool.release(self.model.id)

    def wanted(self) -> bool:
        return self._pool.wanted(self.model.id)
