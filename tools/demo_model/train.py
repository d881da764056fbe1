"""Joint training of the demo trunk and its MTP head on packed chat text, deterministically.

One loss trains both, as Qwen and DeepSeek train their MTP layers: the trunk's next-token
cross-entropy plus ``mtp_weight`` times the head's cross-entropy on the token after next (from the
trunk's post-norm hidden state at t and the embedding of token t+1). The head's gradient flows into
the trunk. Every random choice (initialisation, data order) comes from one seed, the number of
steps is fixed rather than timed, and the thread count is pinned, so a rerun gives the same weights.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from demo_model.model import DemoMtpModel


@dataclass(frozen=True)
class TrainSettings:
    steps: int = 850
    batch_size: int = 4
    seq_len: int = 512
    peak_lr: float = 2e-3
    final_lr_fraction: float = 0.1
    warmup_steps: int = 40
    weight_decay: float = 0.1
    mtp_weight: float = 1.0
    grad_clip: float = 1.0
    seed: int = 1234


@dataclass(frozen=True)
class TrainLog:
    """What one logged step measured."""

    step: int
    trunk_loss: float
    mtp_loss: float
    lr: float
    elapsed_s: float
    tokens_per_s: float


@dataclass(frozen=True)
class TrainResult:
    logs: tuple[TrainLog, ...]
    wall_time_s: float
    tokens_seen: int
    epochs_seen: float


def pack_epoch(
    documents: Sequence[Sequence[int]], seq_len: int, generator: torch.Generator
) -> torch.Tensor:
    """The documents in a seeded random order, concatenated and cut into rows of seq_len + 1."""
    order = torch.randperm(len(documents), generator=generator).tolist()
    stream = torch.tensor(
        [token for index in order for token in documents[index]], dtype=torch.long
    )
    rows = stream.numel() // (seq_len + 1)
    return stream[: rows * (seq_len + 1)].view(rows, seq_len + 1)


def joint_losses(model: DemoMtpModel, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(trunk next-token loss, MTP token-after-next loss) for a [batch, seq] block of token ids."""
    states = model.trunk_states(batch)
    trunk_logits = model.logits(states[:, :-1])
    trunk_loss = F.cross_entropy(trunk_logits.flatten(0, 1).float(), batch[:, 1:].flatten())
    positions = torch.arange(1, batch.shape[1], device=batch.device)
    head_states = model.mtp(
        model.embed(batch[:, 1:]), states[:, :-1], model.rope(states, positions)
    )
    mtp_logits = model.logits(head_states[:, :-1])
    mtp_loss = F.cross_entropy(mtp_logits.flatten(0, 1).float(), batch[:, 2:].flatten())
    return trunk_loss, mtp_loss


def _learning_rate(settings: TrainSettings, step: int) -> float:
    if step < settings.warmup_steps:
        return settings.peak_lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    floor = settings.final_lr_fraction
    return settings.peak_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def _optimizer(model: DemoMtpModel, settings: TrainSettings) -> torch.optim.Optimizer:
    decayed = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    kept = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    return torch.optim.AdamW(
        [
            {"params": decayed, "weight_decay": settings.weight_decay},
            {"params": kept, "weight_decay": 0.0},
        ],
        lr=settings.peak_lr,
        betas=(0.9, 0.95),
    )


def train(
    model: DemoMtpModel,
    documents: Sequence[Sequence[int]],
    settings: TrainSettings,
    log: Callable[[TrainLog], None],
    log_every: int = 10,
) -> TrainResult:
    """Train in place for ``settings.steps`` steps: bfloat16 matmuls, float32 master weights."""
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = _optimizer(model, settings)
    epoch_rows = pack_epoch(documents, settings.seq_len, generator)
    row_cursor = 0
    epochs = 0
    logs: list[TrainLog] = []
    started = time.monotonic()
    model.train()
    for step in range(settings.steps):
        if row_cursor + settings.batch_size > epoch_rows.shape[0]:
            epoch_rows = pack_epoch(documents, settings.seq_len, generator)
            row_cursor, epochs = 0, epochs + 1
        batch = epoch_rows[row_cursor : row_cursor + settings.batch_size]
        row_cursor += settings.batch_size
        lr = _learning_rate(settings, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16):
            trunk_loss, mtp_loss = joint_losses(model, batch)
        loss = trunk_loss + settings.mtp_weight * mtp_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optimizer.step()
        if (step + 1) % log_every == 0 or step + 1 == settings.steps:
            elapsed = time.monotonic() - started
            entry = TrainLog(
                step=step + 1,
                trunk_loss=trunk_loss.item(),
                mtp_loss=mtp_loss.item(),
                lr=lr,
                elapsed_s=elapsed,
                tokens_per_s=(step + 1) * settings.batch_size * settings.seq_len / elapsed,
            )
            logs.append(entry)
            log(entry)
    model.eval()
    tokens = settings.steps * settings.batch_size * settings.seq_len
    return TrainResult(
        logs=tuple(logs),
        wall_time_s=time.monotonic() - started,
        tokens_seen=tokens,
        epochs_seen=epochs + row_cursor / epoch_rows.shape[0],
    )
