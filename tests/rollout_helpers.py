"""Helpers for rollout tests: a real tool over a dict, a recording wrapper over the real engine."""

from __future__ import annotations

from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.engine import TransformersEngine
from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolRunner
from tests.precision_modes import FP32


class EchoSearch:
    """A deterministic 'search' tool: returns fixed text (e.g. the gold answer) for any query."""

    name = "search"
    description = "Search."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    def __init__(self, text: str = "Nothing found."):
        self.text = text

    def call(self, arguments):
        return ToolResult(self.text, True, {"titles": [arguments["query"]]})


class RecordingEngine(TransformersEngine):
    """The real transformers engine, keeping a copy of every sampled id sequence it returns."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.sampled: list[list[int]] = []

    def generate(self, prompts, params, **kwargs):
        outs = super().generate(prompts, params, **kwargs)
        self.sampled.extend(list(o.token_ids) for o in outs)
        return outs


def make_env_factory(fmt: str = "tag", tool=None, reward: RewardConfig | None = None):
    runner = ToolRunner([tool or EchoSearch()], timeout_s=5.0)
    reward = reward or RewardConfig()

    def make_env(sample):
        return ToolEnv(runner, get_format(fmt), EnvConfig(format=fmt), reward)

    return make_env


QA_SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"]}
              for i, n in enumerate(["Karivo", "Bamena", "Tolusa", "Meriko"])]


def trainer_config(tmp_path, **over):
    """A small in-process trainer config on the CPU (4 prompts x 3 samples, one PPO epoch)."""
    from agent_r1.config import load_config

    base = {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4, "rollout.n_samples": 3,
            "rollout.max_turns": 3, "rollout.max_tokens_per_turn": 12, "train.ppo_epochs": 1,
            "train.minibatch_size": 12, "train.lr": 1e-3, "train.eval_every": 0, "train.threads": 1,
            "train.device": "cpu", **FP32}  # its callers compare numbers: fp32 on every CPU
    return load_config(None, {**base, **over})
