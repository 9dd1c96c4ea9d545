"""Per-sample `env` values: typed and range-checked when the data is loaded, with the same
schema as the run's config (config.py's coercion and LIMITS); the error names file:line, the key and
the allowed range. A sample may tighten the run's limits, never loosen them.

Strings that hold numbers ("max_calls_per_turn": "2") are coerced as the run's params.yaml and
`--set key=value` are; a value that is no number at all is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_r1.data.io import RowError
from agent_r1.data.loaders import LoadReport
from agent_r1.envs.samples import load_questions as load_questions_jsonl  # rows checked with the env schema
from agent_r1.envs.tool_env import EnvConfig, check_sample_env, sample_env_config
from agent_r1.rewards.scoring import RewardConfig

RUN_ENV = EnvConfig(tools=["search", "calculator"], max_calls_per_turn=3)
RUN_REWARD = RewardConfig(max_process_reward=1.0)


def _rows(path: Path, envs: list) -> Path:
    lines = []
    for i, env in enumerate(envs):
        row = {"id": f"s{i}", "question": f"Question {i}?", "answers": ["x"]}
        if env is not None:
            row["env"] = env
        lines.append(json.dumps(row, allow_nan=True))
    path.write_text("\n".join(lines) + "\n")
    return path


BAD_AT_LOAD = [  # (env, words the message must hold); refused whatever the run's config
    ({"max_calls_per_turn": "two"}, "max_calls_per_turn"),
    ({"max_calls_per_turn": 0}, "[1, 256]"),
    ({"max_calls_per_turn": [2]}, "max_calls_per_turn"),
    ({"max_calls_per_turn": 2.5}, "integer"),
    ({"reward": {"format_penalty": float("nan")}}, "reward.format_penalty"),
    ({"reward": {"format_penalty": 1e308}}, "[-10, 0]"),
    ({"reward": {"format_penalty": float("inf")}}, "reward.format_penalty"),
    ({"reward": {"valid_call_reward": "lots"}}, "reward.valid_call_reward"),
    ({"reward": {"metric": "bleu"}}, "metric"),
    ({"reward": {"bonus": 1}}, "bonus"),
    ({"reward": [1]}, "reward"),
    ({"tools": "search"}, "tools"),
    ({"tools": ["search", {}]}, "list of tool names"),
    ({"format_instructions": "maybe"}, "format_instructions"),
    ({"system_prompt": {"x": 1}}, "system_prompt"),
    ({"format": "hermes"}, "format"),
    ("search", "mapping"),
]


@pytest.mark.parametrize("env, said", BAD_AT_LOAD, ids=[str(e)[:40] for e, _ in BAD_AT_LOAD])
def test_bad_sample_env_fails_at_load_naming_file_line_and_key(tmp_path, env, said):
    path = _rows(tmp_path / "train.jsonl", [None, None, env])
    with pytest.raises(RowError) as err:
        load_questions_jsonl(path)
    assert err.value.line == 3 and f"{path}:3" in str(err.value) and said in str(err.value), str(err.value)
    report = LoadReport()
    assert [s.id for s in load_questions_jsonl(path, skip_bad=True, report=report)] == ["s0", "s1"]
    assert report.skipped[0].line == 3


def test_a_sample_may_tighten_never_loosen_the_runs_limits(tmp_path):
    path = _rows(tmp_path / "train.jsonl", [{"max_calls_per_turn": 2}, {"max_calls_per_turn": 200}])
    with pytest.raises(RowError) as err:
        load_questions_jsonl(path, env=RUN_ENV, reward=RUN_REWARD)
    msg = str(err.value)
    assert f"{path}:2" in msg and "200" in msg and "env.max_calls_per_turn=3" in msg, msg
    path = _rows(tmp_path / "reward.jsonl", [{"reward": {"max_process_reward": 50}}])
    with pytest.raises(RowError, match=r"max_process_reward=1\.0"):
        load_questions_jsonl(path, env=RUN_ENV, reward=RUN_REWARD)
    path = _rows(tmp_path / "tools.jsonl", [{"tools": ["shell"]}])
    with pytest.raises(RowError, match="shell"):
        load_questions_jsonl(path, env=RUN_ENV, reward=RUN_REWARD)
    ok = load_questions_jsonl(_rows(tmp_path / "ok.jsonl", [{"max_calls_per_turn": 3, "tools": ["calculator"]}]),
                              env=RUN_ENV, reward=RUN_REWARD)
    assert ok[0].env["max_calls_per_turn"] == 3


def test_numeric_strings_are_coerced_as_the_run_schema_does():
    env, reward = check_sample_env({"max_calls_per_turn": "2", "reward": {"format_penalty": "-0.5"}}, RUN_ENV,
                                   RUN_REWARD)
    assert env.max_calls_per_turn == 2 and isinstance(env.max_calls_per_turn, int) and reward.format_penalty == -0.5
    env, _ = sample_env_config({"id": "a", "env": {"max_calls_per_turn": "2"}}, RUN_ENV, RUN_REWARD)
    assert env.max_calls_per_turn == 2  # no TypeError mid-run


def test_run_time_errors_name_the_sample_and_both_values():
    with pytest.raises(ValueError) as err:
        sample_env_config({"id": "s9", "env": {"max_calls_per_turn": 200}}, RUN_ENV, RUN_REWARD)
    assert "sample 's9'" in str(err.value) and "200" in str(err.value) and "=3" in str(err.value)


_values = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=6), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                                st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(["max_calls_per_turn", "system_prompt", "format_instructions", "tools", "reward.metric",
                            "reward.format_penalty", "reward.process_reward", "reward.valid_call_reward",
                            "reward.retrieval_hit_reward", "reward.max_process_reward", "nope"]), value=_values)
def test_fuzz_sample_env_is_refused_with_a_value_error_or_is_within_the_run(key, value):
    overrides = {"reward": {key.split(".")[1]: value}} if key.startswith("reward.") else {key: value}
    try:
        env, reward = check_sample_env(overrides, RUN_ENV, RUN_REWARD)
    except ValueError as err:
        assert key.split(".")[-1] in str(err) or "mapping" in str(err), str(err)
        return
    assert 1 <= env.max_calls_per_turn <= RUN_ENV.max_calls_per_turn and set(env.tools) <= set(RUN_ENV.tools)
    assert isinstance(env.system_prompt, str) and isinstance(env.format_instructions, bool)
    assert 0 <= reward.max_process_reward <= RUN_REWARD.max_process_reward
    for v in (reward.format_penalty, reward.valid_call_reward, reward.retrieval_hit_reward):
        assert isinstance(v, float) and abs(v) <= 10
