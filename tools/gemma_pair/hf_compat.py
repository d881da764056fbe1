"""transformers 5.23's Gemma 4 KV-sharing plan, fixed for assistants and for dense targets.

``Gemma4TextConfig.kv_sharing_modes`` (transformers 5.23) says per layer whether it computes its
own KV (None), reuses an earlier layer's ("reuse"), or also stores its KV for others ("store": the
last KV-producing layer of each attention type). Two cases the Gemma 4 assistant depends on fail:

- an assistant's text model, whose every layer is KV-shared (``num_kv_shared_layers`` = all):
  the property raises "The set of layer types producing a cache is different…", so
  ``Gemma4AssistantForCausalLM`` cannot even be built;
- a target without KV-shared layers (26B-A4B/31B style): the property returns no "store" layer,
  so ``return_shared_kv_states`` hands the assistant an empty dict.

The plan below is the property's own rule without those two exits: the last KV-producing layer
of each type stores (also when no layer of the target reuses it) and an all-shared model only
reuses. It is what llama.cpp does (its assistant reads the target's last sliding and last full KV
layers) and what the assistant was trained against. Applied by :func:`patch_kv_sharing` (the
tools and the test references call it before building a model).
"""

from __future__ import annotations

from transformers import Gemma4TextConfig


def kv_sharing_plan(layer_types: list[str], shared_layers: int) -> list[str | None]:
    """Per layer: None (own KV), "store" (own KV, handed to the assistant), "reuse"."""
    first_shared = len(layer_types) - shared_layers
    plan: list[str | None] = [
        None if i < first_shared else "reuse" for i in range(len(layer_types))
    ]
    for kind in set(layer_types[:first_shared]):
        last = max(i for i in range(first_shared) if layer_types[i] == kind)
        plan[last] = "store"
    return plan


def _kv_sharing_modes(self: Gemma4TextConfig) -> list[str | None]:
    return kv_sharing_plan(list(self.layer_types), int(self.num_kv_shared_layers or 0))


def patch_kv_sharing() -> None:
    """Make every Gemma4TextConfig use :func:`kv_sharing_plan` (idempotent)."""
    Gemma4TextConfig.kv_sharing_modes = property(_kv_sharing_modes)  # type: ignore[assignment]
