"""What the trained pair does in transformers: acceptance per depth, and reference drafts.

Acceptance is measured the way a greedy speculative decoder meets it: the target's own greedy
continuation of a held-out prompt is the text, and at every position t of it the assistant drafts
``depth`` tokens from (x_t, h_{t−1}); depth k counts as accepted where drafts 1..k all equal the
continuation's next k tokens. One target pass and one assistant pass per step cover every position.

The reference drafts are what other implementations are checked against (the MLX drafter's test
reads them from ``reference_drafts.npz``): for a few prompts — one longer than the sliding window —
the target's next token x, then the assistant's logits at every step (masked by centroids when
the head has them, and the dense tied head's), each step fed the previous step's argmax. Computed
in float32 from the weights as saved (BF16), so a reader of the saved files can match them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from gemma_pair.drafting import assistant_step, run_target, target_embeddings
from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM


@dataclass(frozen=True)
class Acceptance:
    drafted: int
    accepted_by_depth: tuple[int, ...]

    @property
    def rates(self) -> tuple[float, ...]:
        return tuple(count / self.drafted for count in self.accepted_by_depth)


@torch.no_grad()
def greedy_continuation(target: Gemma4ForCausalLM, prompt: Sequence[int], count: int) -> list[int]:
    tokens = torch.tensor([list(prompt)])
    out = target.generate(tokens, max_new_tokens=count, do_sample=False)
    return out[0].tolist()


@torch.no_grad()
def acceptance(
    target: Gemma4ForCausalLM,
    assistant: Gemma4AssistantForCausalLM,
    texts: Sequence[Sequence[int]],
    prompt_lengths: Sequence[int],
    depth: int,
    *,
    dense: bool,
) -> Acceptance:
    """Greedy acceptance per depth over the continuation part of each text (``dense``: draft
    from the tied head over the whole vocabulary, as llama.cpp does, else from the head as
    configured)."""
    drafted = 0
    accepted = [0] * depth
    for text, start in zip(texts, prompt_lengths, strict=True):
        tokens = torch.tensor([list(text)])
        seen = run_target(target, tokens)
        embedded = target_embeddings(target, tokens)
        length = tokens.shape[1]
        positions = torch.arange(start, length - depth).unsqueeze(0)
        if positions.numel() == 0:
            continue
        previous = seen.hidden[:, start - 1 : length - depth - 1]
        alive = torch.ones(positions.shape[1], dtype=torch.bool)
        feed = embedded[:, start : length - depth]
        for k in range(depth):
            step = assistant_step(assistant, feed, previous, positions, seen.shared_kv)
            logits = step.dense_logits if dense else step.logits
            guess = logits.argmax(-1)[0]
            truth = tokens[0, start + 1 + k : length - depth + 1 + k]
            alive &= guess == truth
            accepted[k] += int(alive.sum())
            feed = target_embeddings(target, guess.unsqueeze(0))
            previous = step.carried
        drafted += positions.shape[1]
    return Acceptance(drafted, tuple(accepted))


@torch.no_grad()
def reference_drafts(
    target: Gemma4ForCausalLM,
    assistant: Gemma4AssistantForCausalLM,
    prompts: Sequence[Sequence[int]],
    depth: int,
) -> dict[str, np.ndarray]:
    """Arrays for ``reference_drafts.npz``: per prompt i, ``prompt_i`` (ids), ``first_i`` (the
    target's next token), ``drafted_i`` [depth] (each step's argmax, fed to the next step),
    ``logits_i`` and ``dense_logits_i`` [depth, vocab] (float32)."""
    arrays: dict[str, np.ndarray] = {}
    for index, prompt in enumerate(prompts):
        tokens = torch.tensor([list(prompt)])
        seen = run_target(target, tokens)
        first = int(seen.logits[0, -1].argmax())
        position = torch.tensor([[len(prompt)]])
        feed = target_embeddings(target, torch.tensor([[first]]))
        previous = seen.hidden[:, -1:]
        logits, dense, drafted = [], [], []
        for _ in range(depth):
            step = assistant_step(assistant, feed, previous, position, seen.shared_kv)
            logits.append(step.logits[0, 0].float().numpy())
            dense.append(step.dense_logits[0, 0].float().numpy())
            choice = int(step.logits[0, 0].argmax())
            drafted.append(choice)
            feed = target_embeddings(target, torch.tensor([[choice]]))
            previous = step.carried
        arrays[f"prompt_{index}"] = np.asarray(prompt, dtype=np.int32)
        arrays[f"first_{index}"] = np.asarray(first, dtype=np.int32)
        arrays[f"drafted_{index}"] = np.asarray(drafted, dtype=np.int32)
        arrays[f"logits_{index}"] = np.stack(logits)
        arrays[f"dense_logits_{index}"] = np.stack(dense)
    return arrays


@torch.no_grad()
def public_path_difference(
    target: Gemma4ForCausalLM, assistant: Gemma4AssistantForCausalLM, prompt: Sequence[int]
) -> float:
    """Max |Δ| between the first draft step here and transformers' own assistant forward
    (``Gemma4AssistantForCausalLM.forward``, as its candidate generator calls it) for a prompt
    shorter than the sliding window — the check that this module drafts as transformers does."""
    tokens = torch.tensor([list(prompt)])
    seen = run_target(target, tokens)
    first = int(seen.logits[0, -1].argmax())
    feed = target_embeddings(target, torch.tensor([[first]]))
    previous = seen.hidden[:, -1:]
    ours = assistant_step(assistant, feed, previous, torch.tensor([[len(prompt)]]), seen.shared_kv)
    theirs = assistant(
        inputs_embeds=torch.cat([feed, previous], dim=-1),
        position_ids=torch.tensor([[len(prompt)]]),
        attention_mask=torch.ones(1, len(prompt) + 1, dtype=torch.long),
        shared_kv_states=seen.shared_kv,
    )
    return float((ours.logits - theirs.logits).abs().max())
