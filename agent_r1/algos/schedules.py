"""Learning-rate schedule shapes by name (`train.lr_schedule`): progress in [0, 1] -> a multiple of
the base rate. The trainer applies them (agent_r1/training/schedule.py); the config checks names here."""

from __future__ import annotations

import math
from collections.abc import Callable

LR_SCHEDULES: dict[str, Callable[[float], float]] = {
    "constant": lambda progress: 1.0,
    "linear": lambda progress: max(0.0, 1.0 - progress),
    "cosine": lambda progress: 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))),
}
