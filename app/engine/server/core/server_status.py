"""``GET /v1/status`` and ``POST /models/unload``: what a running server holds, and letting go.

The status is what ``mtp-studio ps`` prints and the Server page shows: the loaded models (state,
slots in use, requests waiting, estimated and resident memory, when each will be unloaded for
idleness), the requests being served or waiting (endpoint, stream or not, client address, tokens
so far — never their text), and the server's limits. ``/models/unload`` (llama-server's name for
it) unloads an idle model at once; a model with requests running or waiting is a 409.
docs/server-api.md#status-and-unloading.
"""

from __future__ import annotations

from typing import Any

from app.engine.server.core.api_errors import ApiError, bad_request
from app.engine.server.core.model_directory import ModelDirectory
from app.engine.server.core.request_fields import json_object, model_name
from app.engine.server.core.scheduler import JobStatus
from app.engine.server.models.names import resolve
from app.engine.server.models.pool import LOADED, NOT_LOADED, LoadedStatus

PINNED = "pinned"
LIBRARY = "library"


def server_status(models: ModelDirectory, started: int) -> dict[str, Any]:
    loaded = models.loaded()
    schedulers = {scheduler.model: scheduler for scheduler in models.schedulers()}
    rows = [_loaded_row(models, status, schedulers.get(status.id)) for status in loaded]
    rules = models.pool.rules
    resident = [status.resident_bytes for status in loaded if status.resident_bytes is not None]
    return {
        "object": "server.status",
        "mode": PINNED if models.pinned else LIBRARY,
        "started": started,
        "models_available": len(models.catalogue.models),
        "limits": {
            "max_loaded": rules.max_loaded,
            "memory_budget_bytes": rules.budget_bytes,
            "idle_unload_seconds": rules.idle_unload_seconds,
            "queue_size": models.config.queue_size,
        },
        "memory": {
            "estimated_bytes": sum(status.estimate_bytes for status in loaded),
            "resident_bytes": sum(resident),
        },
        "loaded": rows,
        "clients": [_client_row(job) for job in models.jobs()],
    }


def _loaded_row(models: ModelDirectory, status: LoadedStatus, scheduler: Any) -> dict[str, Any]:
    info = status.info
    model = models.find(status.id)
    return {
        "id": status.id,
        "state": status.state,
        "backend": info.backend if info else None,
        "context_length": info.context_length if info else None,
        "slots": {
            "total": status.sequences,
            "busy": scheduler.running if scheduler is not None else 0,
        },
        "waiting": scheduler.waiting if scheduler is not None else 0,
        "memory": {
            "estimated_bytes": status.estimate_bytes,
            "resident_bytes": status.resident_bytes,
        },
        "load_seconds": round(status.load_seconds, 3),
        "loaded_seconds_ago": round(status.loaded_seconds_ago, 1),
        "idle_seconds": round(status.idle_seconds, 1),
        "unload_in_seconds": (
            round(status.unload_in_seconds, 1) if status.unload_in_seconds is not None else None
        ),
        "mtp": {
            "status": model.mtp if model is not None else None,
            "layers": info.mtp_layers if info else None,
            "drafting": bool(info and info.mtp_available),
            "note": info.mtp_unavailable_reason if info else None,
        },
    }


def _client_row(job: JobStatus) -> dict[str, Any]:
    return {
        "id": job.id,
        "model": job.model,
        "state": job.state,
        "endpoint": job.origin.endpoint,
        "stream": job.origin.stream,
        "client": job.origin.client,
        "seconds": round(job.seconds, 2),
        "generated_tokens": job.generated_tokens,
        "tokens_per_second": round(job.tokens_per_second, 2),
    }


def unload_model(models: ModelDirectory, body: Any) -> dict[str, Any]:
    """Unload the model ``body["model"]`` names if it is idle; its state otherwise."""
    name = model_name(json_object(body))
    if not name:
        raise bad_request("'model' is required: the id of a loaded model (GET /v1/status)", "model")
    found = resolve(name, models.catalogue, models.aliases, pinned=models.pinned)
    if found.model is None:
        raise ApiError(404, found.message, param="model", code="model_not_found")
    model_id = found.model.id
    outcome = models.pool.unload(model_id)
    if outcome == "busy":
        scheduler = next((s for s in models.schedulers() if s.model == model_id), None)
        running = scheduler.running if scheduler is not None else 0
        waiting = scheduler.waiting if scheduler is not None else 0
        raise ApiError(
            409,
            f"{model_id} is serving {running} request(s) with {waiting} waiting: unload it when "
            "they are done",
            code="model_busy",
        )
    unloaded = outcome == LOADED
    return {
        "object": "model.unload",
        "model": model_id,
        "unloaded": unloaded,
        "state": NOT_LOADED if unloaded else outcome,
    }
