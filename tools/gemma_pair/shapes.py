"""The two tiny Gemma 4 target + assistant shapes: Google's small (E2B/E4B) and big (26B/31B) kinds.

Google ships a `gemma4_assistant` drafter for every Gemma 4 size, in two kinds that exercise
different code in every runtime, so the project makes one tiny pair of each:

- **centroid** (E2B/E4B style): the target has per-layer embeddings (PLE), KV-shared last layers
  (``num_kv_shared_layers``) with double-wide MLPs; the assistant's LM head is masked by
  centroids (``use_ordered_embeddings``, ``num_centroids``, ``centroid_intermediate_top_k``: score
  the centroids, keep the top k, compute logits only for their tokens).
- **dense** (26B-A4B/31B style): no PLE, no KV-shared layers, keys equal values on the full
  attention layers (``attention_k_eq_v``); the assistant's LM head is its tied embedding, dense.

Both keep what the runtimes rely on: the target's last two KV-producing layers are a sliding then
a full attention layer (llama.cpp's assistant reads the target's layer n−2 for its sliding layers
and n−1 for its full ones), the assistant's head sizes and KV head counts equal the target's per
layer type (its queries attend to the target's keys), and every assistant layer is KV-shared.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import Gemma4AssistantConfig, Gemma4TextConfig

CENTROID = "centroid"
DENSE = "dense"
KINDS = (CENTROID, DENSE)
SLIDING, FULL = "sliding_attention", "full_attention"


@dataclass(frozen=True)
class PairShape:
    """Sizes of one tiny pair; the vocabulary is shared by target and assistant."""

    kind: str
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    heads: int = 4
    head_dim: int = 32
    global_head_dim: int = 64
    sliding_window: int = 64
    max_positions: int = 4096
    assistant_hidden_size: int = 64
    assistant_intermediate_size: int = 192
    assistant_layers: int = 4
    num_centroids: int = 32
    centroid_top_k: int = 4

    @property
    def target_layer_types(self) -> list[str]:
        if self.kind == CENTROID:
            return [SLIDING, SLIDING, FULL, SLIDING, SLIDING, FULL]
        return [SLIDING, SLIDING, SLIDING, FULL]

    @property
    def assistant_layer_types(self) -> list[str]:
        return [SLIDING] * (self.assistant_layers - 1) + [FULL]


def _common(shape: PairShape, special_ids: dict[str, int]) -> dict[str, object]:
    return {
        "vocab_size": shape.vocab_size,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": 1,
        "head_dim": shape.head_dim,
        "global_head_dim": shape.global_head_dim,
        "sliding_window": shape.sliding_window,
        "max_position_embeddings": shape.max_positions,
        "rms_norm_eps": 1e-6,
        "pad_token_id": special_ids["pad"],
        "bos_token_id": special_ids["bos"],
        "eos_token_id": [special_ids["eos"], special_ids["turn_end"]],
    }


def target_config(shape: PairShape, special_ids: dict[str, int]) -> Gemma4TextConfig:
    layer_types = shape.target_layer_types
    common = _common(shape, special_ids)
    if shape.kind == CENTROID:
        specific: dict[str, object] = {
            "num_kv_shared_layers": len(layer_types) // 2,
            "hidden_size_per_layer_input": 16,
            "vocab_size_per_layer_input": shape.vocab_size,
            "use_double_wide_mlp": True,
        }
    else:
        specific = {
            "num_kv_shared_layers": 0,
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
            "attention_k_eq_v": True,
            "num_global_key_value_heads": 1,
        }
    return Gemma4TextConfig(
        **common,
        **specific,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=len(layer_types),
        layer_types=layer_types,
        final_logit_softcapping=30.0,
        tie_word_embeddings=True,
    )


def assistant_config(shape: PairShape, special_ids: dict[str, int]) -> Gemma4AssistantConfig:
    layer_types = shape.assistant_layer_types
    text = Gemma4TextConfig(
        **_common(shape, special_ids),
        hidden_size=shape.assistant_hidden_size,
        intermediate_size=shape.assistant_intermediate_size,
        num_hidden_layers=len(layer_types),
        layer_types=layer_types,
        num_kv_shared_layers=len(layer_types),
        hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0,
        attention_k_eq_v=shape.kind == DENSE,
        num_global_key_value_heads=1 if shape.kind == DENSE else None,
        final_logit_softcapping=None,
        tie_word_embeddings=True,
    )
    return Gemma4AssistantConfig(
        text_config=text,
        backbone_hidden_size=shape.hidden_size,
        use_ordered_embeddings=shape.kind == CENTROID,
        num_centroids=shape.num_centroids,
        centroid_intermediate_top_k=shape.centroid_top_k,
        tie_word_embeddings=True,
        architectures=["Gemma4AssistantForCausalLM"],
    )
