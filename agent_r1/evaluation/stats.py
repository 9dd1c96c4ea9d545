"""Confidence intervals for scores over several seeds: a two-level (seeds, then questions) bootstrap.

A score table is `scores[seed][question]` (e.g. 0/1 exact match per held-out question, one row
per training seed). Both sources of noise count: which seeds were run and which questions were
asked. Each bootstrap replicate draws the seeds with replacement, then, within each drawn seed,
its questions with replacement, and takes the mean; the interval is the percentile interval of
those means.

A difference between two methods is bootstrapped *paired*: both tables must hold the same seeds
and questions in the same order (same world, same warm start per seed), and each replicate uses
the same draws for both, so the question-to-question variation they share cancels out. An
interval that excludes 0 is the evidence a table needs before it calls one method better.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_BOOT, LEVEL = 4000, 0.95  # bootstrap replicates (seeded 0), and the interval's coverage

@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "low": self.low, "high": self.high}

    def __str__(self) -> str:
        return f"{self.mean:.1f} [{self.low:.1f}, {self.high:.1f}]"


def _table(scores: Sequence[Sequence[float]], name: str) -> np.ndarray:
    rows = [np.asarray(r, dtype=float) for r in scores]
    if not rows or any(r.size == 0 for r in rows):
        raise ValueError(f"{name}: need at least one seed with at least one question")
    if len({r.size for r in rows}) != 1:
        raise ValueError(f"{name}: every seed needs the same number of questions, got {[r.size for r in rows]}")
    return np.stack(rows)


def _interval(table: np.ndarray) -> Interval:
    """The mean of `table` [seeds, questions] and the percentile interval of N_BOOT two-level bootstrap means."""
    rng = np.random.default_rng(0)
    n_seeds, n_q = table.shape
    seed_idx = rng.integers(0, n_seeds, size=(N_BOOT, n_seeds))
    q_idx = rng.integers(0, n_q, size=(N_BOOT, n_seeds, n_q))
    reps = table[seed_idx[..., None], q_idx].mean(axis=(1, 2))
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(reps, [tail, 100 - tail])
    return Interval(float(table.mean()), float(low), float(high))


def mean_ci(scores: Sequence[Sequence[float]]) -> Interval:
    """Mean of `scores[seed][question]` with its bootstrap interval (same units as the scores)."""
    return _interval(_table(scores, "scores"))


def paired_difference_ci(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Interval:
    """Mean of a - b over the same seeds and questions, with its paired bootstrap interval."""
    ta, tb = _table(a, "a"), _table(b, "b")
    if ta.shape != tb.shape:
        raise ValueError(f"paired tables differ in shape: {ta.shape} vs {tb.shape} "
                         "(same seeds and questions, in the same order, are needed)")
    return _interval(ta - tb)
