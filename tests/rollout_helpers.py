"""Helpers for rollout tests: a real tool over a dict, a recording wrapper over the real engine."""

from __future__ import annotations

from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.engine import TransformersEngine
from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolRunner


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
