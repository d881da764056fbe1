"""From a request's ``model`` to the model that answers it and the queue it waits in.

A library server (``serve`` without ``--model``) rescans the model folders when a request names a
model it does not know (a download may just have finished) and when ``/v1/models`` is listed,
at most every few seconds; a pinned server (``serve --model``) has its one model and its aliases.
A name that picks no model is the API's 404 (or a 400 for a missing or ambiguous name), naming
what the server has. Every model asked for gets its own :class:`Scheduler` — requests for
different models run at once, requests for one model queue — over the shared
:class:`~app.engine.server.models.pool.ModelPool` (docs/server-api.md#models). A loaded model's
prompts are counted in the server's process (:class:`PromptCheck`, over the counter its runner
opened with it); a model not loaded yet has its prompts measured by its worker once it loads.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.chat.memory import RUNTIME_DEFAULT_CONTEXT
from app.engine.errors import UnrunnableBuildError
from app.engine.runtime.core.backend import ModelInfo
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH, GenerationResult
from app.engine.server.core.api_errors import ApiError, bad_request
from app.engine.server.core.config import ServerConfig
from app.engine.server.core.prompt_check import PromptCheck
from app.engine.server.core.request_fields import RequestDefaults
from app.engine.server.core.scheduler import JobStatus, Scheduler
from app.engine.server.models.catalogue import MTP_NONE, Catalogue, ServableModel
from app.engine.server.models.loading import LoadRules, RunnerFactory
from app.engine.server.models.names import AMBIGUOUS, MISSING, Alias, resolve
from app.engine.server.models.pool import LoadedStatus, ModelPool, PoolLease

RESCAN_SECONDS = 2.0
"""A name the server does not know rescans the model folders at most this often."""
LIST_RESCAN_SECONDS = 5.0
"""``/v1/models`` shows a scan at most this old."""


@dataclass(frozen=True)
class RequestModel:
    """What a request's handler needs of the model it named."""

    model: ServableModel
    scheduler: Scheduler
    defaults: RequestDefaults
    image_refusal: str | None
    """Why the model cannot take images (None when it reads them, or may: a model not loaded
    yet with a projector beside it is asked, and says so if it cannot)."""
    prompts: PromptCheck | None = None
    """Counts the model's prompts in the server's process (None until the model is loaded)."""

    @property
    def id(self) -> str:
        return self.model.id


class ModelDirectory:
    """The catalogue (rescanned by ``scan``, or fixed when ``scan`` is None), the pool, and one
    scheduler per model asked for."""

    def __init__(
        self,
        catalogue: Catalogue,
        pool: ModelPool,
        factory: RunnerFactory,
        config: ServerConfig,
        *,
        scan: Callable[[], Catalogue] | None = None,
        aliases: Sequence[Alias] = (),
        on_finished: Callable[[GenerationResult], None] | None = None,
        on_unrunnable: Callable[[UnrunnableBuildError], None] | None = None,
    ) -> None:
        self._catalogue = catalogue
        self._scanned_at = time.monotonic()
        self._scan = scan
        self._scan_lock = asyncio.Lock()
        self.pool = pool
        self.factory = factory
        self.config = config
        self.aliases = tuple(aliases)
        self._on_finished = on_finished
        self._on_unrunnable = on_unrunnable
        self._schedulers: dict[str, Scheduler] = {}
        self._leases: dict[str, PoolLease] = {}
        self._lock = threading.Lock()

    @property
    def pinned(self) -> bool:
        return self._scan is None

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue

    async def rescanned(self, max_age: float = LIST_RESCAN_SECONDS) -> Catalogue:
        """The catalogue, rescanned first when older than ``max_age`` seconds."""
        scan = self._scan
        if scan is None:
            return self._catalogue
        async with self._scan_lock:
            if time.monotonic() - self._scanned_at >= max_age:
                self._catalogue = await asyncio.to_thread(scan)
                self._scanned_at = time.monotonic()
        return self._catalogue

    async def model_for(self, name: str | None) -> RequestModel:
        """The model ``name`` picks, with its queue; an :class:`ApiError` naming what the server
        has when it picks none."""
        if name is not None and not name.strip():
            raise bad_request("'model' must name a model (GET /v1/models lists them)", "model")
        found = resolve(name, self._catalogue, self.aliases, pinned=self.pinned)
        if found.model is None and not self.pinned and found.problem not in (MISSING, AMBIGUOUS):
            found = resolve(name, await self.rescanned(RESCAN_SECONDS), self.aliases)
        if found.model is None:
            if found.problem in (MISSING, AMBIGUOUS):
                raise bad_request(found.message, "model")
            raise ApiError(404, found.message, param="model", code="model_not_found")
        return self._request_model(found.model)

    def find(self, model_id: str) -> ServableModel | None:
        return self._catalogue.by_id(model_id)

    def _request_model(self, model: ServableModel) -> RequestModel:
        with self._lock:
            scheduler = self._schedulers.get(model.id)
            if scheduler is None:
                lease = PoolLease(self.pool, model)
                scheduler = Scheduler(
                    lease,
                    self.config.queue_size,
                    self._on_finished,
                    model=model.id,
                    on_unrunnable=self._on_unrunnable,
                )
                self._schedulers[model.id] = scheduler
                self._leases[model.id] = lease
                scheduler.start()
            else:
                self._leases[model.id].model = model  # a rescan may have new facts about it
        refusal = _image_refusal(model, self.factory.known_info(model.id), self.factory.rules)
        return RequestModel(
            model, scheduler, self._defaults(model), refusal, self._prompts(model.id)
        )

    def _prompts(self, model_id: str) -> PromptCheck | None:
        runner = self.pool.loaded_runner(model_id)
        if runner is None:
            return None
        info = runner.info
        return PromptCheck(runner.counter, info.context_length, info.path.name)

    def _defaults(self, model: ServableModel) -> RequestDefaults:
        info = self.factory.known_info(model.id)
        if info is not None:
            context = info.context_length
            max_depth = info.max_draft_depth if info.mtp_available else MAX_DRAFT_DEPTH
        else:
            settings = self.factory.plan(model).settings
            context = settings.context_length or RUNTIME_DEFAULT_CONTEXT
            drafts = model.mtp != MTP_NONE and model.mtp_note is None
            max_depth = settings.max_draft_depth if drafts else MAX_DRAFT_DEPTH
        return RequestDefaults(
            depth=self.config.mtp_depth,
            max_tokens=self.config.default_max_tokens or context,
            max_depth=max_depth,
        )

    # --- the whole server -----------------------------------------------------------------------

    def schedulers(self) -> tuple[Scheduler, ...]:
        with self._lock:
            return tuple(self._schedulers.values())

    @property
    def waiting(self) -> int:
        return sum(scheduler.waiting for scheduler in self.schedulers())

    @property
    def running(self) -> int:
        return sum(scheduler.running for scheduler in self.schedulers())

    def jobs(self) -> tuple[JobStatus, ...]:
        return tuple(job for scheduler in self.schedulers() for job in scheduler.jobs())

    def loaded(self) -> tuple[LoadedStatus, ...]:
        return self.pool.statuses()

    def stop(self) -> None:
        """Stop every queue, then unload every model."""
        for scheduler in self.schedulers():
            scheduler.stop()
        self.pool.close()


def _image_refusal(model: ServableModel, info: ModelInfo | None, rules: LoadRules) -> str | None:
    """Why ``model`` reads no images, from its load (``info``) or, before it loads, from what
    is beside it; None when it reads them (or may)."""
    if info is not None:
        if info.reads_images:
            return None
        reason = info.images_unavailable_reason or f"{info.path.name} reads no images"
        return f"{reason}: send text only"
    if not rules.images:
        return "this server reads no images (serve --mmproj none): send text only"
    if not model.is_gguf:
        from app.engine.runtime.backends.mlx.vision_folder import unavailable_reason

        reason = unavailable_reason(model.path)
        return None if reason is None else f"{reason}: send text only"
    if rules.projector is None and model.projector is None:
        return (
            f"{model.path.name} has no vision projector (no mmproj-*.gguf beside the model "
            "file), so it cannot read images: send text only, or use a vision model with its "
            "projector beside it"
        )
    return None
