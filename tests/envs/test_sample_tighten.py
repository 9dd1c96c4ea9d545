"""Every setting a data row may give its own episode is held to the run's with the run's schema, and may
only tighten it: a row may not turn process rewards back on in an ablation run, raise
a reward, soften the format penalty or switch to a more lenient answer metric; its text has a ceiling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.data.io import RowError
from agent_r1.envs.samples import load_questions as load_questions_jsonl  # rows checked with the env schema
from agent_r1.envs.tool_env import EnvConfig, check_sample_env
from agent_r1.rewards.scoring import RewardConfig

RUN_ENV = EnvConfig(tools=["search", "calculator"], max_calls_per_turn=3)
# an ablation run: no process rewards, a penalty for giving no answer, exact match
RUN_REWARD = RewardConfig(metric="em", process_reward=False, valid_call_reward=0.0, retrieval_hit_reward=0.0,
                          format_penalty=-1.0, max_process_reward=1.0)

LOOSER = [  # (the row's env, the key the refusal names)
    ({"reward": {"process_reward": True}}, "process_reward"),
    ({"reward": {"valid_call_reward": 10}}, "valid_call_reward"),
    ({"reward": {"retrieval_hit_reward": 10}}, "retrieval_hit_reward"),
    ({"reward": {"format_penalty": 0}}, "format_penalty"),
    ({"reward": {"metric": "substring"}}, "metric"),
    ({"reward": {"metric": "f1"}}, "metric"),
    ({"system_prompt": "x" * 20_000_000}, "system_prompt"),
]


@pytest.mark.parametrize("env, key", LOOSER, ids=[k + str(i) for i, (_, k) in enumerate(LOOSER)])
def test_a_row_cannot_loosen_the_runs_settings(tmp_path, env, key):
    path = tmp_path / "train.jsonl"
    rows = [{"id": "a", "question": "Q?", "answers": ["x"]}, {"id": "b", "question": "Q?", "answers": ["x"], "env": env}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RowError) as info:
        load_questions_jsonl(path, env=RUN_ENV, reward=RUN_REWARD)
    assert info.value.line == 2 and key in str(info.value), str(info.value)[:300]
    assert len(str(info.value)) < 2000, "the message quotes the whole value"


def test_a_row_may_tighten_them():
    env, reward = check_sample_env({"max_calls_per_turn": 1, "tools": ["calculator"], "system_prompt": "Be brief.",
                                    "reward": {"format_penalty": -2, "valid_call_reward": -0.5,
                                               "metric": "numeric"}}, RUN_ENV, RUN_REWARD)
    assert (env.max_calls_per_turn, reward.format_penalty, reward.metric) == (1, -2, "numeric")
    _, reward = check_sample_env({"reward": {"process_reward": False, "metric": "em"}}, RUN_ENV,
                                 RewardConfig(metric="substring", process_reward=True))
    assert reward.process_reward is False and reward.metric == "em"


def test_the_runs_own_text_has_the_same_ceiling():
    from agent_r1.config import load_config

    with pytest.raises(ValueError, match="env.system_prompt"):
        load_config(None, {"env.system_prompt": "x" * 20_000_000})


@pytest.mark.parametrize("field, value", [
    ("answers", ["x" * 5000]), ("answers", ["x"] * 1001), ("supporting_titles", [1, 2]),
    ("supporting_titles", ["t" * 5000]), ("plan", ["q"] * 1001), ("meta", {"blob": "m" * 70_000}),
    ("id", "i" * 5000),
])
def test_every_other_field_of_a_row_has_a_type_and_a_ceiling(tmp_path, field, value):
    path = tmp_path / "train.jsonl"
    row = {"id": "b", "question": "Q?", "answers": ["x"], field: value}
    path.write_text(json.dumps({"id": "a", "question": "Q?", "answers": ["x"]}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(RowError) as info:
        load_questions_jsonl(path)
    assert info.value.line == 2 and field in str(info.value), str(info.value)[:300]
