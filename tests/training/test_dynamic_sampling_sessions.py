"""Dynamic sampling over agent sessions split into steps: a group is one prompt's sessions, however
many steps (rows) each left, and a session counts once in the informative test."""

from __future__ import annotations

import pytest

from agent_r1.algos.advantages import informative, split_groups
from agent_r1.config import load_config
from agent_r1.training.trainer import fill_batch
from agent_r1.trajectory import Trajectory, Turn

N = 2


def _session(sid: str, j: int, reward: float, steps: int = 1) -> list[Trajectory]:
    return [Trajectory(sample_id=sid, prompt_ids=[1], outcome_reward=reward, session_id=f"{sid}/{j}")
            for _ in range(steps)]


def test_split_sessions_group_by_prompt_not_by_row_count():
    # prompt a: session 0 left two steps (a drifted call), session 1 one: 3 rows, one group of 2 sessions
    trajs = [*_session("a", 0, 1.0, steps=2), *_session("a", 1, 0.0), *_session("b", 2, 1.0), *_session("b", 3, 1.0)]
    groups = split_groups(trajs, N)
    assert [[t.session_id for t in g] for g in groups] == [["a/0", "a/0", "a/1"], ["b/2", "b/3"]]
    assert informative(groups[0]) and not informative(groups[1])


def test_a_session_counts_once_in_the_informative_test():
    """A session's value is its last step's, as the group estimators read it (algos/advantages.py): an
    earlier step's own score (here a process reward) does not make the group informative."""
    first, last = _session("a", 0, 1.0, steps=2)
    first.turns = [Turn(action_ids=[2], action_logprobs=[0.0], action_text="", process_reward=-0.5)]
    assert first.score != last.score
    assert not informative([first, last, *_session("a", 1, 1.0)])


def test_a_dropped_session_leaves_a_smaller_group():
    # a session that made no call is dropped by the agent rollout: its prompt has one session left
    groups = split_groups([*_session("a", 0, 1.0), *_session("b", 2, 0.0), *_session("b", 3, 1.0)], N)
    assert [len(g) for g in groups] == [1, 2]


def test_fill_batch_keeps_every_step_of_a_kept_session():
    cfg = load_config(None, {"algo.dynamic_sampling.enabled": True, "train.prompts_per_iter": 2,
                             "rollout.n_samples": N, "algo.dynamic_sampling.max_extra_rounds": 0})
    first = [*_session("a", 0, 1.0, steps=2), *_session("a", 1, 0.0), *_session("b", 2, 1.0), *_session("b", 3, 1.0)]
    trajs, metrics = fill_batch(cfg, first, lambda r: pytest.fail("no extra round allowed"))
    assert [t.session_id for t in trajs] == ["a/0", "a/0", "a/1"]
    assert metrics["dynamic/groups_kept"] == 1.0 and metrics["dynamic/groups_dropped"] == 1.0


def test_agent_metrics_count_every_session_rolled_out_not_only_the_kept():
    """The agent/* counts travel on the sessions' steps (and the rollout's dropped sessions on its first
    trajectory): with dynamic sampling they describe every session of every round, dropped groups too."""
    from agent_r1.agents.assemble import agent_metrics

    def counted(sid, j, reward, drift, empty=0.0):
        (step,) = _session(sid, j, reward)
        step.metrics = {"agent/count/sessions": 1.0, "agent/count/steps": 1.0, "agent/count/calls": 2.0,
                        "agent/count/drift": drift, "agent/count/errors": 0.0}
        if empty:
            step.metrics["agent/count/empty"] = empty
        return [step]

    cfg = load_config(None, {"algo.dynamic_sampling.enabled": True, "train.prompts_per_iter": 1,
                             "rollout.n_samples": N, "algo.dynamic_sampling.max_extra_rounds": 1})
    # round 0: prompt a's group is all-equal (dropped), and it carries the rollout's one empty session
    first = [*counted("a", 0, 1.0, drift=1.0, empty=1.0), *counted("a", 1, 1.0, drift=1.0)]
    second = [*counted("b", 2, 1.0, drift=0.0), *counted("b", 3, 0.0, drift=0.0)]
    trajs, metrics = fill_batch(cfg, first, lambda r: second)
    assert [t.sample_id for t in trajs] == ["b", "b"]
    assert agent_metrics(trajs)["agent/drift"] == 0.0  # the kept groups alone would say no drift
    assert metrics["agent/sessions"] == 4.0 and metrics["agent/drift"] == 2.0 and metrics["agent/empty"] == 1.0
    assert metrics["agent/steps_per_session"] == 1.0
