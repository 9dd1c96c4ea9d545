"""Deterministic prompt order: a fresh permutation per epoch from (seed, epoch).

The position (epoch, offset) is all the state there is, so a resumed run draws exactly the
prompts the uninterrupted run would have drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass
class PromptSampler:
    samples: list[dict[str, Any]]
    seed: int
    epoch: int = 0
    offset: int = 0

    def _order(self, epoch: int) -> list[int]:
        order = list(range(len(self.samples)))
        random.Random(self.seed * 100_003 + epoch).shuffle(order)
        return order

    def next_batch(self, n: int) -> list[dict[str, Any]]:
        if not self.samples:
            raise ValueError("no training samples: check data.dir and data.train_file")
        out = []
        while len(out) < n:
            order = self._order(self.epoch)
            take = order[self.offset: self.offset + (n - len(out))]
            out.extend(self.samples[i] for i in take)
            self.offset += len(take)
            if self.offset >= len(order):
                self.epoch, self.offset = self.epoch + 1, 0
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.offset = int(state["epoch"]), int(state["offset"])
