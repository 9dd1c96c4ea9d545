"""Learning-rate schedules over RL iterations (`train.lr_schedule`, `train.warmup_iterations`).

The scheduler steps once per iteration (not per optimiser step), so a schedule means the same
thing whatever the number of PPO epochs and mini-batches; its state travels in the checkpoint.
"""

from __future__ import annotations

import torch

from agent_r1.algos.schedules import LR_SCHEDULES


def lr_factor(iteration: int, total: int, warmup: int, schedule: str) -> float:
    """The multiple of `train.lr` used in iteration `iteration` (0-based)."""
    if warmup > 0 and iteration < warmup:
        return (iteration + 1) / (warmup + 1)
    decay = max(total - warmup, 1)
    return LR_SCHEDULES[schedule]((iteration - warmup) / decay)


def make_scheduler(optimizer: torch.optim.Optimizer, train_cfg) -> torch.optim.lr_scheduler.LambdaLR:
    t = train_cfg
    if t.lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"train.lr_schedule={t.lr_schedule!r}; choose one of {sorted(LR_SCHEDULES)}")
    if t.warmup_iterations < 0:
        raise ValueError(f"train.warmup_iterations={t.warmup_iterations} must be >= 0")
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda it: lr_factor(it, t.iterations, t.warmup_iterations, t.lr_schedule))
