"""``GET /metrics``: the server's counters in Prometheus text format (prometheus-client).

Requests by endpoint and status, prompt and generated tokens, drafted and accepted tokens by draft
depth (acceptance at depth i = accepted / drafted, docs/architecture.md#statistics), MTP cycles and
their drafts by the requests' depth setting ("auto" or K: drafts ÷ cycles is the mean depth auto
chose), the last request's decode speed, prompt tokens reused from kept state and the memory that
state holds, and how many requests wait and run; model loads (by outcome, with their time) and
unloads (by reason: idle, evicted, admin, shutdown), and the models loaded and loading now. Each
server owns its registry, so several can share a process.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from app.engine.runtime.core.request import GenerationResult
from app.engine.server.core.depth import reported_depth
from app.engine.server.models.pool import (
    LOAD_FAILED_EVENT,
    LOADED_EVENT,
    UNLOADED_EVENT,
    PoolEvent,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST
PREFIX = "mtp_studio"
LOAD_SECONDS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320)


class ServerMetrics:
    def __init__(
        self,
        waiting: Callable[[], int],
        running: Callable[[], int],
        models_loaded: Callable[[], int] = lambda: 0,
    ) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            f"{PREFIX}_requests",
            "HTTP requests answered, by endpoint and status code",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self._generations = Counter(
            f"{PREFIX}_generations",
            "Generations finished, by finish reason (stop, length, context, cancelled)",
            ["finish_reason"],
            registry=self.registry,
        )
        self._prompt_tokens = Counter(
            f"{PREFIX}_prompt_tokens", "Prompt tokens processed", registry=self.registry
        )
        self._cached_tokens = Counter(
            f"{PREFIX}_prompt_tokens_cached",
            "Prompt tokens whose state was kept from an earlier request (not computed again)",
            registry=self.registry,
        )
        self._kept_state = Gauge(
            f"{PREFIX}_kept_state_bytes",
            "Memory held by states kept for later prompts (checkpoints, saved conversations)",
            registry=self.registry,
        )
        self._generated_tokens = Counter(
            f"{PREFIX}_generated_tokens", "Tokens generated", registry=self.registry
        )
        self._drafted = Counter(
            f"{PREFIX}_draft_tokens",
            "MTP draft tokens proposed, by draft depth (1 = first drafted token)",
            ["depth"],
            registry=self.registry,
        )
        self._accepted = Counter(
            f"{PREFIX}_draft_tokens_accepted",
            "MTP draft tokens accepted, by draft depth",
            ["depth"],
            registry=self.registry,
        )
        self._cycles = Counter(
            f"{PREFIX}_cycles",
            "MTP cycles (drafts, then one verify call), by the requests' depth setting: auto or K",
            ["depth_setting"],
            registry=self.registry,
        )
        self._cycle_drafts = Counter(
            f"{PREFIX}_cycle_draft_tokens",
            "MTP draft tokens proposed, by the requests' depth setting; divided by "
            f"{PREFIX}_cycles_total it is the mean drafts per cycle (with auto: the depths chosen)",
            ["depth_setting"],
            registry=self.registry,
        )
        self._decode_speed = Gauge(
            f"{PREFIX}_decode_tokens_per_second",
            "Decode speed of the last finished generation (tokens/s, prefill excluded)",
            registry=self.registry,
        )
        waiting_gauge = Gauge(
            f"{PREFIX}_queue_length",
            "Requests waiting for their model (all models; not counting the running ones)",
            registry=self.registry,
        )
        waiting_gauge.set_function(lambda: float(waiting()))
        running_gauge = Gauge(
            f"{PREFIX}_generation_running",
            "Generations running now (all models)",
            registry=self.registry,
        )
        running_gauge.set_function(lambda: float(running()))
        self._model_metrics(models_loaded)

    def _model_metrics(self, models_loaded: Callable[[], int]) -> None:
        loaded_gauge = Gauge(
            f"{PREFIX}_models_loaded", "Models loaded in a worker now", registry=self.registry
        )
        loaded_gauge.set_function(lambda: float(models_loaded()))
        self._loading = Gauge(
            f"{PREFIX}_models_loading", "Models being loaded now", registry=self.registry
        )
        self._loads = Counter(
            f"{PREFIX}_model_loads",
            "Model loads, by model and outcome (loaded, failed)",
            ["model", "outcome"],
            registry=self.registry,
        )
        self._load_seconds = Histogram(
            f"{PREFIX}_model_load_seconds",
            "Time to load a model into its worker (seconds), by model",
            ["model"],
            buckets=LOAD_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self._unloads = Counter(
            f"{PREFIX}_model_unloads",
            "Model unloads, by model and reason (idle, evicted, admin, shutdown)",
            ["model", "reason"],
            registry=self.registry,
        )

    def record_model_event(self, event: PoolEvent) -> None:
        """A load starting, ending or failing, or an unload (:class:`PoolEvent`)."""
        if event.kind == LOADED_EVENT:
            self._loading.dec()
            self._loads.labels(model=event.model_id, outcome="loaded").inc()
            self._load_seconds.labels(model=event.model_id).observe(event.seconds)
        elif event.kind == LOAD_FAILED_EVENT:
            self._loading.dec()
            self._loads.labels(model=event.model_id, outcome="failed").inc()
        elif event.kind == UNLOADED_EVENT:
            self._unloads.labels(model=event.model_id, reason=event.reason).inc()
        else:
            self._loading.inc()

    def record_request(self, endpoint: str, status: int) -> None:
        self._requests.labels(endpoint=endpoint, status=str(status)).inc()

    def record_generation(self, result: GenerationResult) -> None:
        stats = result.stats
        self._generations.labels(finish_reason=result.finish_reason).inc()
        self._prompt_tokens.inc(stats.prompt_tokens)
        self._cached_tokens.inc(stats.prompt_reused_tokens)
        self._kept_state.set(result.kept_state_bytes)
        self._generated_tokens.inc(stats.generated_tokens)
        for depth, (drafted, accepted) in enumerate(
            zip(stats.drafted_by_depth, stats.accepted_by_depth, strict=True), start=1
        ):
            self._drafted.labels(depth=str(depth)).inc(drafted)
            self._accepted.labels(depth=str(depth)).inc(accepted)
        if stats.cycles:
            setting = str(reported_depth(stats))
            self._cycles.labels(depth_setting=setting).inc(stats.cycles)
            self._cycle_drafts.labels(depth_setting=setting).inc(sum(stats.drafted_by_depth))
        if stats.generated_tokens:
            self._decode_speed.set(stats.decode_tokens_per_second)

    def render(self) -> bytes:
        return generate_latest(self.registry)
