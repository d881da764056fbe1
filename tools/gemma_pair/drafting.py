"""How a Gemma 4 assistant drafts from its target in transformers: for training, as the reference.

The assistant (docs/drafters.md) never sees the text itself. For the token x_t at position t (the
newest token, not yet run through the target) and the target's post-norm hidden state h_{t−1} of
the position before it, step 1 takes [E(x_t)·√H, h_{t−1}] (E: the *target's* embedding, √H its
Gemma scale), projects it to the assistant's width, runs the assistant's layers — their queries at
position t attend to the target's own keys and values of positions < t: its last sliding layer's
for the assistant's sliding layers (only keys with t − k < window), its last full layer's for the
full ones — and gives logits and a state projected back to the target's width. Step k > 1 takes
[E(d_{k−1}), that state] at the *same* position t and the same keys: the assistant's KV never grows.
That is llama.cpp's ``draft-mtp`` for ``gemma4-assistant`` exactly (mask included), and what
transformers' SinglePositionMultiTokenCandidateGenerator does for contexts shorter than the window.

Everything here works on all positions of a batch at once (one query row per position t), which
is how the assistant is distilled; the reference drafts of :mod:`gemma_pair.reference` use it
with one row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM

SLIDING, FULL = "sliding_attention", "full_attention"


@dataclass(frozen=True)
class TargetPass:
    """What the assistant reads from one target forward over [B, T] tokens."""

    hidden: torch.Tensor  # [B, T, H] post-norm
    logits: torch.Tensor  # [B, T, V] (soft-capped, as the target samples)
    shared_kv: dict[str, tuple[torch.Tensor, torch.Tensor]]  # type → ([B, kv, T, d], …)


def run_target(target: Gemma4ForCausalLM, tokens: torch.Tensor) -> TargetPass:
    out = target(tokens, output_hidden_states=True, return_shared_kv_states=True, use_cache=False)
    return TargetPass(out.hidden_states[-1], out.logits, dict(out.shared_kv_states))


def target_embeddings(target: Gemma4ForCausalLM, tokens: torch.Tensor) -> torch.Tensor:
    """E(x)·√H: the target's scaled input embedding (Gemma4TextScaledWordEmbedding)."""
    return target.get_input_embeddings()(tokens)


def draft_masks(
    query_positions: torch.Tensor, key_count: int, window: int
) -> dict[str, torch.Tensor]:
    """Boolean [B, 1, L, S] masks (True: attend): keys k < t, and t − k < window when sliding."""
    keys = torch.arange(key_count)
    t = query_positions[:, None, :, None]
    before = keys[None, None, None, :] < t
    return {FULL: before, SLIDING: before & (t - keys[None, None, None, :] < window)}


@dataclass(frozen=True)
class DraftStep:
    logits: torch.Tensor  # [B, L, V] what the assistant's head gives (masked by centroids or not)
    dense_logits: torch.Tensor  # [B, L, V] the tied head over the whole vocabulary
    carried: torch.Tensor  # [B, L, H_target] the state fed to the next step
    last_hidden: torch.Tensor  # [B, L, H_assistant] post-norm, before the head


def assistant_step(
    assistant: Gemma4AssistantForCausalLM,
    embedded: torch.Tensor,
    previous: torch.Tensor,
    positions: torch.Tensor,
    shared_kv: dict[str, tuple[torch.Tensor, torch.Tensor]],
) -> DraftStep:
    """One draft step for every row: ``embedded`` E(token)·√H and ``previous`` (h or a carried
    state), both [B, L, H_target], at ``positions`` [B, L]."""
    window = assistant.config.get_text_config().sliding_window
    key_count = shared_kv[FULL][0].shape[2]
    inputs = assistant.pre_projection(torch.cat([embedded, previous], dim=-1))
    out = assistant.model(
        inputs_embeds=inputs,
        attention_mask=draft_masks(positions, key_count, window),
        position_ids=positions,
        shared_kv_states=shared_kv,
        use_cache=False,
        output_hidden_states=True,  # else 5.23 slices absent per-layer inputs and fails
    )
    last = out.last_hidden_state
    dense = assistant.lm_head(last)
    masked = (
        assistant.masked_embedding(last, assistant.lm_head.weight)
        if assistant.masked_embedding is not None
        else dense
    )
    return DraftStep(masked, dense, assistant.post_projection(last), last)
