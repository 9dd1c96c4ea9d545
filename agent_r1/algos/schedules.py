"""Learning-rate schedules over RL iterations (`train.lr_schedule`, `train.warmup_iterations`): a shape
by name maps progress in [0, 1] to a multiple of the base rate, after a linear warmup.

The scheduler steps once per iteration (not per optimiser step), so a schedule means the same
thing whatever the number of PPO epochs and mini-batches; its state travels in the checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from agent_r1.registry import NoTraits, Registry

LR_SCHEDULES: Registry[Callable[[float], float], NoTraits] = Registry(
    "learning-rate schedule", key="train.lr_schedule", where="agent_r1.algos.schedules.LR_SCHEDULES")
LR_SCHEDULES.register("constant", lambda progress: 1.0)
LR_SCHEDULES.register("linear", lambda progress: max(0.0, 1.0 - progress))
LR_SCHEDULES.register("cosine", lambda progress: 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


def lr_factor(iteration: int, total: int, warmup: int, schedule: str) -> float:
    """The multiple of `train.lr` used in iteration `iteration` (0-based)."""
    if warmup > 0 and iteration < warmup:
        return (iteration + 1) / (warmup + 1)
    decay = max(total - warmup, 1)
    return LR_SCHEDULES[schedule]((iteration - warmup) / decay)


def make_scheduler(optimizer: torch.optim.Optimizer, train_cfg) -> torch.optim.lr_scheduler.LambdaLR:
    t = train_cfg
    LR_SCHEDULES.check(t.lr_schedule)
    if t.warmup_iterations < 0:
        raise ValueError(f"train.warmup_iterations={t.warmup_iterations} must be >= 0")
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda it: lr_factor(it, t.iterations, t.warmup_iterations, t.lr_schedule))
