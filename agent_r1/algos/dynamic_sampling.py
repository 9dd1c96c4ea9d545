"""`algo.dynamic_sampling`'s config and its group filter (DAPO, Yu et al. 2025, section 3.2): which
groups of a rollout carry no gradient for a group estimator. The loop that drops them and rolls out
more prompts is agent_r1/training/dynamic_sampling.py (`fill_batch`); the config lives here, below
the config tree, as algos/rollout_correction.py's does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent_r1.trajectory import Trajectory

METRICS: dict[str, Callable[[Trajectory], float]] = {
    "score": lambda t: t.score,  # outcome + process rewards: what the group estimators compare
    "outcome": lambda t: t.outcome_reward,  # the outcome reward alone (overlong shaping included)
}


@dataclass
class DynamicSamplingConfig:
    """`algo.dynamic_sampling` (agent_r1/training/dynamic_sampling.py)."""
    enabled: bool = False
    max_extra_rounds: int = 4  # rollouts beyond the iteration's own before learning from what was kept
    metric: str = "score"  # score | outcome: the value that must differ within a group for it to be kept

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"algo.dynamic_sampling.metric={self.metric!r}; choose one of {sorted(METRICS)}")


def split_groups(trajs: list[Trajectory], n_samples: int) -> list[list[Trajectory]]:
    """The groups of a rollout (run_rollout returns `n_samples` consecutive trajectories per prompt).
    Consecutive chunks rather than sample ids: a prompt drawn twice is two groups."""
    if len(trajs) % n_samples:
        raise ValueError(f"{len(trajs)} trajectories do not split into groups of rollout.n_samples={n_samples}")
    groups = [trajs[i:i + n_samples] for i in range(0, len(trajs), n_samples)]
    for g in groups:
        if len({t.sample_id for t in g}) != 1:
            raise ValueError(f"a group mixes prompts {sorted({t.sample_id for t in g})}: trajectories must come "
                             "grouped by prompt, as run_rollout returns them")
    return groups


def informative(group: list[Trajectory], metric: str = "score") -> bool:
    """Whether the group's values differ (a group of one has no baseline to compare with: kept)."""
    values = [METRICS[metric](t) for t in group]
    return len(values) < 2 or max(values) != min(values)
