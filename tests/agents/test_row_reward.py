"""An agent's answer is scored by its row's own reward settings (`env.reward` in the row, e.g. the
arithmetic task's `metric: numeric`), as the built-in env scores the same row; the run's `reward`
stands where the row says nothing."""

from __future__ import annotations

import pytest

from agent_r1.agents.rollout import session_reward
from agent_r1.config import RewardConfig

ROW = {"id": "a1", "question": "2 + 2?", "answers": ["4"], "env": {"tools": ["calculator"], "reward": {"metric": "numeric"}}}


def test_the_rows_metric_scores_the_answer():
    reward, answer, error = session_reward("4.0", ROW, RewardConfig(metric="em"))
    assert (reward, answer, error) == (1.0, "4.0", "")  # numeric: 4.0 is 4; em would say 0


def test_the_runs_metric_where_the_row_names_none():
    row = {k: v for k, v in ROW.items() if k != "env"}
    assert session_reward("4.0", row, RewardConfig(metric="em"))[0] == 0.0


def test_a_bad_row_reward_is_an_error_naming_the_row():
    row = {**ROW, "env": {"reward": {"metric": "no-such-metric"}}}
    with pytest.raises(ValueError, match="a1"):
        session_reward("4", row, RewardConfig())
