"""Question rows loaded for an env: each row's own `env` settings checked with the env's schema.

The loader (agent_r1/data/loaders.py) knows rows, not envs; this is where the two meet, so a row that
sets an unknown key, a value out of range, or (with the run's configs) loosens the run's limits fails
at load with its file:line, not mid-rollout.
"""

from __future__ import annotations

from typing import Any

from agent_r1.data.loaders import LoadReport, QASample, load_questions_jsonl
from agent_r1.envs.factory import kind_traits
from agent_r1.envs.tool_env import EnvConfig, check_sample_env
from agent_r1.rewards.scoring import RewardConfig


def load_questions(path: Any, env: EnvConfig | None = None, reward: RewardConfig | None = None,
                   skip_bad: bool = False, report: LoadReport | None = None) -> list[QASample]:
    """`load_questions_jsonl` with each row's env checked against `env`/`reward` (the run's: a row may
    only tighten them), or against the config schema alone when they are not given."""
    serves_tools = kind_traits(env.kind).serves_tools if env is not None else True
    return load_questions_jsonl(path, skip_bad=skip_bad, report=report,
                                check_env=lambda own: check_sample_env(own, env, reward, serves_tools=serves_tools))
