"""Held-out figures of the demo model: trunk loss, head loss, and the head's acceptance by depth.

Two questions matter to a user of the demo: does the trunk predict unseen standard-library code
(held-out cross-entropy), and how often would the MTP head's drafts be accepted in greedy
speculative decoding. The second is measured the way the runtime drafts
(docs/architecture.md#the-speculative-cycle, docs/formats.md#running-the-heads): the trunk greedily
answers held-out requests; then, from every committed position, the head drafts recursively — step k
feeds the head's own post-norm output and the embedding of draft k−1, attending to the committed
rows and the chain's earlier rows, exactly the cache a llama.cpp MTP context holds — and a chain is
accepted through depth k when its first k drafts equal the trunk's greedy tokens (which the
generated text is, by construction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from demo_model.model import DemoMtpModel


@dataclass(frozen=True)
class HeldOutLosses:
    trunk_loss: float  # nats per token, next token
    mtp_loss: float  # nats per token, token after next
    head_top1_agreement: (
        float  # head's argmax == trunk's argmax for the same position, teacher-forced
    )
    tokens: int


@dataclass(frozen=True)
class Acceptance:
    """Greedy acceptance of recursive drafts: accepted[k] / drafted[k] for depth k = 1..K."""

    drafted: tuple[int, ...]
    accepted: tuple[int, ...]
    generated_tokens: int
    prompts: int

    @property
    def rates(self) -> tuple[float, ...]:
        return tuple(a / d if d else 0.0 for a, d in zip(self.accepted, self.drafted, strict=True))


@torch.no_grad()
def held_out_losses(
    model: DemoMtpModel, documents: Sequence[Sequence[int]], seq_len: int
) -> HeldOutLosses:
    """Teacher-forced losses over the held-out documents, in order, packed into rows of seq_len."""
    stream = torch.tensor([t for document in documents for t in document], dtype=torch.long)
    trunk_sum = mtp_sum = agree = count = 0.0
    for start in range(0, stream.numel() - 2, seq_len):
        row = stream[start : start + seq_len + 1][None, :]
        if row.shape[1] < 3:
            break
        states = model.trunk_states(row)
        trunk_logits = model.logits(states)
        positions = torch.arange(1, row.shape[1])
        head_states = model.mtp(
            model.embed(row[:, 1:]), states[:, :-1], model.rope(states, positions)
        )
        head_logits = model.logits(head_states[:, :-1])
        n = row.shape[1] - 2
        trunk_sum += F.cross_entropy(trunk_logits[0, :-1], row[0, 1:], reduction="sum").item()
        mtp_sum += F.cross_entropy(head_logits[0], row[0, 2:], reduction="sum").item()
        # the trunk's own greedy guess for x_{t+2} is made at position t+1
        agree += (head_logits[0].argmax(-1) == trunk_logits[0, 1:-1].argmax(-1)).sum().item()
        count += n
    trunk_tokens = stream.numel() - 1
    return HeldOutLosses(
        trunk_loss=trunk_sum / trunk_tokens,
        mtp_loss=mtp_sum / count,
        head_top1_agreement=agree / count,
        tokens=trunk_tokens,
    )


def _chain_mask(rows: int, blocks: int) -> torch.Tensor:
    """Who may attend to whom when ``blocks`` depths of drafts ride on ``rows`` committed rows.

    Block 0 holds the committed rows (causal). Block b ≥ 1 holds, for every committed row i, the
    chain's step b+1 from that row: it sees committed rows ≤ i and its own chain's steps ≤ b.
    """
    index = torch.arange(rows)
    causal = index[None, :] <= index[:, None]
    same = torch.eye(rows, dtype=torch.bool)
    mask = torch.zeros(rows * blocks, rows * blocks, dtype=torch.bool)
    for block in range(blocks):
        query = slice(block * rows, (block + 1) * rows)
        mask[query, :rows] = causal
        for earlier in range(1, block + 1):
            mask[query, earlier * rows : (earlier + 1) * rows] = same
    return mask


@torch.no_grad()
def draft_chains(model: DemoMtpModel, tokens: torch.Tensor, depth: int) -> torch.Tensor:
    """Recursive greedy drafts from every committed row of ``tokens`` [T]: a [depth, T-1] tensor.

    Row i starts at committed token x_{i+1} with the trunk state h_i; drafts[k-1, i] is the head's
    guess for x_{i+1+k}.
    """
    states = model.trunk_states(tokens[None, :])  # [1, T, hidden]
    rows = tokens.numel() - 1
    index = torch.arange(rows)
    token_inputs = [model.embed(tokens[None, 1:])]
    state_inputs = [states[:, :-1]]
    drafts: list[torch.Tensor] = []
    for block in range(depth):
        blocks = block + 1
        positions = torch.cat([index + 1 + b for b in range(blocks)])
        outputs = model.mtp(
            torch.cat(token_inputs, dim=1),
            torch.cat(state_inputs, dim=1),
            model.rope(states, positions),
            attention_mask=_chain_mask(rows, blocks) if blocks > 1 else None,
        )
        chain_state = outputs[:, block * rows :]
        draft = model.logits(chain_state).argmax(-1)
        drafts.append(draft[0])
        token_inputs.append(model.embed(draft))
        state_inputs.append(chain_state)
    return torch.stack(drafts)


@torch.no_grad()
def greedy_continuation(
    model: DemoMtpModel, prompt: Sequence[int], max_new_tokens: int, stop_token: int
) -> list[int]:
    """The trunk's greedy continuation of ``prompt`` (stop token included when reached)."""
    output = model.trunk.generate(
        torch.tensor([list(prompt)]),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=stop_token,
        pad_token_id=stop_token,
    )
    return output[0, len(prompt) :].tolist()


@torch.no_grad()
def acceptance_by_depth(
    model: DemoMtpModel,
    prompts: Sequence[Sequence[int]],
    depth: int,
    max_new_tokens: int,
    stop_token: int,
) -> Acceptance:
    drafted = [0] * depth
    accepted = [0] * depth
    generated_total = 0
    for prompt in prompts:
        generated = greedy_continuation(model, prompt, max_new_tokens, stop_token)
        generated_total += len(generated)
        tokens = torch.tensor([*prompt, *generated])
        drafts = draft_chains(model, tokens, depth)
        for row in range(len(prompt) - 1, tokens.numel() - 1):  # x_{row+1} is a generated token
            chain_ok = True
            for k in range(1, depth + 1):
                target = row + 1 + k
                if target >= tokens.numel():
                    break
                chain_ok = chain_ok and bool(drafts[k - 1, row] == tokens[target])
                drafted[k - 1] += 1
                accepted[k - 1] += int(chain_ok)
    return Acceptance(
        drafted=tuple(drafted),
        accepted=tuple(accepted),
        generated_tokens=generated_total,
        prompts=len(prompts),
    )
