"""Brief, deterministic training of the tiny target, then distillation of its assistant.

The pair is for tests and for trying the feature offline, so acceptance must mean something but
minutes of CPU are the budget. The target learns the chat corpus (next-token cross-entropy). The
assistant is then distilled from the frozen target, as Google's assistants are trained against
their target: for every position t of a batch row, steps 1..K run as in
:mod:`gemma_pair.drafting` (teacher-forced with the row's own tokens) and each step's dense logits
are pulled toward the target's distribution for that token (KL(p_target ‖ q)).

A centroid head (E2B/E4B kind) then needs a token ordering and its centroid scorer: the tokens
are clustered by their rows of the tied head (balanced k-means, so every centroid owns
``vocab / num_centroids`` tokens, as the checkpoint layout requires), and the scorer learns the
target's probability mass per cluster (KL again) while the rest keeps training. Everything is
seeded; the thread count is pinned by the caller.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from gemma_pair.drafting import assistant_step, run_target, target_embeddings
from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM


@dataclass(frozen=True)
class Schedule:
    steps: int
    batch_size: int
    seq_len: int
    peak_lr: float
    warmup_steps: int = 20
    final_lr_fraction: float = 0.1

    def lr(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.peak_lr * (step + 1) / self.warmup_steps
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        floor = self.final_lr_fraction
        return self.peak_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass(frozen=True)
class StepLog:
    stage: str
    step: int
    loss: float
    elapsed_s: float


class Batches:
    """Rows of ``seq_len`` tokens cut from the documents in a seeded order, epoch by epoch."""

    def __init__(self, documents: Sequence[Sequence[int]], seq_len: int, seed: int) -> None:
        self._documents = documents
        self._seq_len = seq_len
        self._generator = torch.Generator().manual_seed(seed)
        self._rows = self._epoch()
        self._cursor = 0

    def _epoch(self) -> torch.Tensor:
        order = torch.randperm(len(self._documents), generator=self._generator).tolist()
        stream = torch.tensor([t for i in order for t in self._documents[i]], dtype=torch.long)
        rows = stream.numel() // self._seq_len
        return stream[: rows * self._seq_len].view(rows, self._seq_len)

    def next(self, size: int) -> torch.Tensor:
        if self._cursor + size > self._rows.shape[0]:
            self._rows, self._cursor = self._epoch(), 0
        batch = self._rows[self._cursor : self._cursor + size]
        self._cursor += size
        return batch


def _optimizer(module: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    params = [p for p in module.parameters() if p.requires_grad]
    decayed = [p for p in params if p.ndim >= 2]
    kept = [p for p in params if p.ndim < 2]
    groups = [{"params": decayed, "weight_decay": 0.05}, {"params": kept, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def _run(
    stage: str,
    module: torch.nn.Module,
    schedule: Schedule,
    batches: Batches,
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    log: Callable[[StepLog], None],
) -> list[StepLog]:
    optimizer = _optimizer(module, schedule.peak_lr)
    logs: list[StepLog] = []
    started = time.monotonic()
    module.train()
    for step in range(schedule.steps):
        for group in optimizer.param_groups:
            group["lr"] = schedule.lr(step)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_of(batches.next(schedule.batch_size))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % 10 == 0 or step + 1 == schedule.steps:
            entry = StepLog(stage, step + 1, loss.item(), time.monotonic() - started)
            logs.append(entry)
            log(entry)
    module.eval()
    return logs


def train_target(
    target: Gemma4ForCausalLM,
    batches: Batches,
    schedule: Schedule,
    log: Callable[[StepLog], None],
) -> list[StepLog]:
    def loss_of(batch: torch.Tensor) -> torch.Tensor:
        logits = target(batch[:, :-1], use_cache=False).logits
        return F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())

    return _run("target", target, schedule, batches, loss_of, log)


def _kl(target_logits: torch.Tensor, draft_logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) per row, averaged: the draft's distribution pulled toward the target's."""
    p_log = F.log_softmax(target_logits.float(), dim=-1)
    q_log = F.log_softmax(draft_logits.float(), dim=-1)
    return (p_log.exp() * (p_log - q_log)).sum(-1).mean()


def distillation_loss(
    target: Gemma4ForCausalLM,
    assistant: Gemma4AssistantForCausalLM,
    batch: torch.Tensor,
    depth: int,
    centroid_weight: float,
) -> torch.Tensor:
    """Sum over draft steps 1..depth of KL(target ‖ assistant) for every position t ≥ 1 of the
    rows (plus the centroid scorer's KL on cluster mass when ``centroid_weight`` > 0)."""
    with torch.no_grad():
        seen = run_target(target, batch)
        embedded = target_embeddings(target, batch)
    rows, length = batch.shape
    queries = length - depth  # t = 1 .. length − depth, so t + depth − 1 < length
    positions = torch.arange(1, queries + 1).expand(rows, -1)
    previous = seen.hidden[:, :queries]  # h_{t−1}
    total = torch.zeros(())
    for k in range(depth):
        tokens_in = embedded[:, 1 + k : queries + 1 + k]  # x_{t+k}
        step = assistant_step(assistant, tokens_in, previous, positions, seen.shared_kv)
        wanted = seen.logits[:, 1 + k : queries + 1 + k]  # target's p(x_{t+k+1} | x_{≤t+k})
        total = total + _kl(wanted, step.dense_logits)
        if centroid_weight > 0:
            total = total + centroid_weight * _centroid_kl(assistant, step.last_hidden, wanted)
        previous = step.carried
    return total


def _centroid_kl(
    assistant: Gemma4AssistantForCausalLM, hidden: torch.Tensor, wanted: torch.Tensor
) -> torch.Tensor:
    embedder = assistant.masked_embedding
    clusters = embedder.token_ordering.view(embedder.num_centroids, -1)
    mass = F.softmax(wanted.float(), dim=-1)[..., clusters].sum(-1)  # [B, L, C]
    scored = F.log_softmax(embedder.centroids(hidden).float(), dim=-1)
    return (mass * (mass.clamp_min(1e-12).log() - scored)).sum(-1).mean()


def balanced_clusters(
    rows: torch.Tensor, clusters: int, seed: int, rounds: int = 20
) -> torch.Tensor:
    """A token ordering: ``rows`` (one per token) in ``clusters`` groups of equal size, by
    k-means on the normalised rows with every group filled to capacity in order of affinity."""
    generator = torch.Generator().manual_seed(seed)
    points = F.normalize(rows.float(), dim=-1)
    count = points.shape[0]
    capacity = count // clusters
    centres = points[torch.randperm(count, generator=generator)[:clusters]].clone()
    assignment = torch.zeros(count, dtype=torch.long)
    for _ in range(rounds):
        affinity = points @ centres.T  # [N, C]
        assignment = torch.full((count,), -1, dtype=torch.long)
        filled = torch.zeros(clusters, dtype=torch.long)
        for flat in torch.argsort(affinity.flatten(), descending=True).tolist():
            token, cluster = divmod(flat, clusters)
            if assignment[token] < 0 and filled[cluster] < capacity:
                assignment[token] = cluster
                filled[cluster] += 1
        for cluster in range(clusters):
            members = points[assignment == cluster]
            centres[cluster] = F.normalize(members.mean(0), dim=-1)
    return torch.cat([torch.nonzero(assignment == c).flatten() for c in range(clusters)])


def distil_assistant(
    target: Gemma4ForCausalLM,
    assistant: Gemma4AssistantForCausalLM,
    batches: Batches,
    schedule: Schedule,
    depth: int,
    seed: int,
    log: Callable[[StepLog], None],
) -> list[StepLog]:
    """Distil ``assistant`` from the frozen ``target``; a centroid head gets its ordering and
    scorer in the second half of the steps."""
    target.eval()
    for parameter in target.parameters():
        parameter.requires_grad_(False)
    centroid = assistant.masked_embedding is not None
    first = Schedule(
        schedule.steps // 2 if centroid else schedule.steps,
        schedule.batch_size,
        schedule.seq_len,
        schedule.peak_lr,
    )
    logs = _run(
        "assistant",
        assistant,
        first,
        batches,
        lambda batch: distillation_loss(target, assistant, batch, depth, 0.0),
        log,
    )
    if not centroid:
        return logs
    with torch.no_grad():
        ordering = balanced_clusters(
            assistant.lm_head.weight.detach(), assistant.masked_embedding.num_centroids, seed
        )
        assistant.masked_embedding.token_ordering.copy_(ordering)
    second = Schedule(
        schedule.steps - first.steps, schedule.batch_size, schedule.seq_len, schedule.peak_lr / 2
    )
    logs += _run(
        "centroids",
        assistant,
        second,
        batches,
        lambda batch: distillation_loss(target, assistant, batch, depth, 1.0),
        log,
    )
    return logs
