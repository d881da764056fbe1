"""Constrained decoding on the MLX backend (the demo's BF16 folder): a JSON schema holds, and
greedy MTP under the schema gives plain decoding's tokens."""

from __future__ import annotations

import json

import jsonschema
import pytest

from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.chat_format.constraint import json_schema_constraint
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.speculative.generation import generate

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "language": {"enum": ["python", "c", "rust"]},
    },
    "required": ["name", "language"],
    "additionalProperties": False,
}


def _run(backend: MlxBackend, depth: int) -> GenerationResult:
    request = GenerationRequest(
        messages=(ChatMessage("user", "Describe a programmer."),),
        max_tokens=60,
        mtp_depth=depth,
        constraint=json_schema_constraint(SCHEMA, "the test schema"),
    )
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


@pytest.mark.slow
def test_greedy_constrained_mtp_equals_constrained_plain_decoding(bf16: MlxBackend) -> None:
    plain = _run(bf16, 0)
    jsonschema.validate(json.loads(plain.text), SCHEMA)
    for depth in (1, 3):
        assert _run(bf16, depth).token_ids == plain.token_ids, depth
