"""``GET /v1/models`` and ``GET /v1/models/{id}``: the models on disk as OpenAI's model objects.

Each object has OpenAI's fields (``id``, ``object``, ``created``, ``owned_by``) and what a local
server's clients want to know, as Ollama and LM Studio list them: ``format``, ``quantization``,
``size_bytes``, ``architecture``, ``state`` (loaded, loading or not-loaded) and an ``mtp`` object
— how the model drafts (``head`` inside the file, a paired ``sidecar`` or ``drafter``, or
``none``), its head layers and the server's depth setting (docs/server-api.md#models).
"""

from __future__ import annotations

from typing import Any

from app.engine.server.core.model_directory import ModelDirectory
from app.engine.server.core.mtp_field import MTP_EXTENSION
from app.engine.server.models.catalogue import MTP_HEAD, ServableModel
from app.engine.server.models.pool import LOADED, LoadedStatus

NOT_LOADED = "not-loaded"
PINNED_DESCRIPTION = (
    "The one model this server runs (serve --model): requests name it by this id, a short name "
    "or a --alias."
)


def model_list(models: ModelDirectory) -> dict[str, Any]:
    states = {status.id: status for status in models.loaded()}
    return {
        "object": "list",
        "data": [
            model_card(model, models, states.get(model.id)) for model in models.catalogue.models
        ],
    }


def model_card(
    model: ServableModel, models: ModelDirectory, status: LoadedStatus | None
) -> dict[str, Any]:
    info = models.factory.known_info(model.id)
    layers = info.mtp_layers if info is not None else _head_layers(model)
    card: dict[str, Any] = {
        "id": model.id,
        "object": "model",
        "created": model.created,
        "owned_by": _owner(model),
        "format": model.format,
        "quantization": model.quantisation,
        "size_bytes": model.size_bytes,
        "architecture": model.architecture,
        "state": status.state if status is not None else NOT_LOADED,
        MTP_EXTENSION: {
            "status": model.mtp,
            "layers": layers,
            "depth": models.config.mtp_depth,
            "detail": model.mtp_detail or None,
            "note": model.mtp_note,
        },
    }
    if models.pinned:
        card["description"] = PINNED_DESCRIPTION
    if status is not None and status.state == LOADED and status.info is not None:
        card["context_length"] = status.info.context_length
    return card


def _head_layers(model: ServableModel) -> int:
    return model.description.mtp_blocks if model.mtp == MTP_HEAD else 0


def _owner(model: ServableModel) -> str:
    repo = model.description.repo_id
    return repo.split("/")[0] if repo and "/" in repo else "mtp-studio"
