"""`algo.dynamic_sampling`'s config and its group filter (DAPO, Yu et al. 2025, section 3.2): which
groups of a rollout carry no gradient for a group estimator. The loop that drops them and rolls out
more prompts is agent_r1/training/dynamic_sampling.py (`fill_batch`); the config lives here, below
the config tree, as algos/correction.py's does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from agent_r1.registry import NoTraits, Registry
from agent_r1.trajectory import Trajectory

#: `algo.dynamic_sampling.metric` -> the value of a trajectory that must differ within a kept group
METRICS: Registry[Callable[[Trajectory], float], NoTraits] = Registry(
    "dynamic-sampling metric", key="algo.dynamic_sampling.metric", where="agent_r1.algos.dynamic_sampling.METRICS")


@METRICS.register("score")
def _score(traj: Trajectory) -> float:
    return traj.score  # outcome + process rewards: what the group estimators compare


@METRICS.register("outcome")
def _outcome(traj: Trajectory) -> float:
    return traj.outcome_reward  # the outcome reward alone (overlong shaping included)


@dataclass
class DynamicSamplingConfig:
    """`algo.dynamic_sampling` (agent_r1/training/dynamic_sampling.py)."""
    enabled: bool = False
    max_extra_rounds: int = 4  # rollouts beyond the iteration's own before learning from what was kept
    metric: str = "score"  # score | outcome: the value that must differ within a group for it to be kept

    def __post_init__(self) -> None:
        METRICS.check(self.metric)


def _session(traj: Trajectory, row: int) -> Hashable:
    """The session a row belongs to: an agent session's steps share `session_id`; "" is its own."""
    return traj.session_id or ("row", row)


def split_groups(trajs: list[Trajectory], n_samples: int) -> list[list[Trajectory]]:
    """The groups of a rollout: run_rollout returns `n_samples` sessions per prompt, consecutively.
    A group is a run of one prompt's rows holding `n_samples` sessions, not `n_samples` rows: an agent
    session split into steps (agents/assemble.py) leaves several rows, all in its prompt's group.
    Runs rather than sample ids: a prompt drawn twice is two groups. An agent rollout drops sessions
    that made no call, so an agent group (rows with a session id) may hold fewer sessions; a built-in
    group must hold exactly `n_samples`."""
    groups: list[list[Trajectory]] = []
    sessions: list[set[Hashable]] = []
    for row, traj in enumerate(trajs):
        key = _session(traj, row)
        if groups and groups[-1][0].sample_id == traj.sample_id and (key in sessions[-1]
                                                                    or len(sessions[-1]) < n_samples):
            groups[-1].append(traj)
            sessions[-1].add(key)
        else:
            groups.append([traj])
            sessions.append({key})
    start = 0
    for g, keys in zip(groups, sessions):
        if len(keys) < n_samples and not all(t.session_id for t in g):
            raise ValueError(f"{len(trajs)} trajectories do not split into groups of rollout.n_samples={n_samples}: "
                             f"prompt {g[0].sample_id!r} has {len(keys)} at row {start} (trajectories must come "
                             "grouped by prompt, as run_rollout returns them; a group mixes prompts otherwise)")
        start += len(g)
    return groups


def informative(group: list[Trajectory], metric: str = "score") -> bool:
    """Whether the group's sessions' values differ (a group of one has no baseline: kept). A session
    counts once, with its last step's value, as the group estimators read it (algos/advantages.py)."""
    last = {_session(t, row): METRICS[metric](t) for row, t in enumerate(group)}
    values = list(last.values())
    return len(values) < 2 or max(values) != min(values)
