"""Learning-rate schedule shapes by name (`train.lr_schedule`): progress in [0, 1] -> a multiple of
the base rate. The trainer applies them (agent_r1/training/schedule.py); the config checks names here."""

from __future__ import annotations

import math
from collections.abc import Callable

from agent_r1.registry import NoTraits, Registry

LR_SCHEDULES: Registry[Callable[[float], float], NoTraits] = Registry(
    "learning-rate schedule", key="train.lr_schedule", where="agent_r1.algos.schedules.LR_SCHEDULES")
LR_SCHEDULES.register("constant", lambda progress: 1.0)
LR_SCHEDULES.register("linear", lambda progress: max(0.0, 1.0 - progress))
LR_SCHEDULES.register("cosine", lambda progress: 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))
