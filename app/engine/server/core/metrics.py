"""``GET /metrics``: the server's counters in Prometheus text format (prometheus-client).

Requests by endpoint and status, prompt and generated tokens, drafted and accepted tokens by draft
depth (acceptance at depth i = accepted / drafted, docs/architecture.md#statistics), MTP cycles and
their drafts by the requests' depth setting ("auto" or K: drafts ÷ cycles is the mean depth auto
chose), the last request's decode speed, prompt tokens reused from kept state and the memory that
state holds, and how many requests wait. Each server owns its registry, so several can share a
process.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from app.engine.runtime.core.request import GenerationResult
from app.engine.server.core.depth import reported_depth

CONTENT_TYPE = CONTENT_TYPE_LATEST
PREFIX = "mtp_studio"


class ServerMetrics:
    def __init__(self, waiting: Callable[[], int], busy: Callable[[], bool]) -> None:
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
            "Requests waiting for the model (not counting the running one)",
            registry=self.registry,
        )
        waiting_gauge.set_function(lambda: float(waiting()))
        busy_gauge = Gauge(
            f"{PREFIX}_generation_running",
            "1 while a generation runs",
            registry=self.registry,
        )
        busy_gauge.set_function(lambda: float(busy()))

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
