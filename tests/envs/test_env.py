"""ToolEnv and the tool-call formats: every kind of bad model output becomes an observation."""

from __future__ import annotations

import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_r1.envs.formats import get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.tools.base import ToolResult
from agent_r1.tools.runner import ToolRunner
from tests.rollout_helpers import EchoSearch


class Boom:
    name = "boom"
    description = "Always raises."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        raise RuntimeError("kaput")


class Sleepy:
    name = "sleepy"
    description = "Hangs."
    parameters = {"type": "object", "properties": {}}

    def call(self, arguments):
        time.sleep(2)
        return ToolResult("late")


def _env(fmt="hermes", reward=None, tools=None, max_calls=4):
    runner = ToolRunner(tools or [EchoSearch("Doc about it"), Boom(), Sleepy()], timeout_s=0.3)
    env = ToolEnv(runner, get_format(fmt), EnvConfig(format=fmt, max_calls_per_turn=max_calls),
                  reward or RewardConfig())
    env.reset({"id": "x", "question": "Q?", "answers": ["A"], "supporting_titles": ["Karivo"]})
    return env


def _call(name, args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_hermes_valid_call_runs_tool():
    out = _env().step(_call("search", {"query": "Karivo"}))
    assert not out.done and "Doc about it" in out.observation and "<tool_response>" in out.observation
    assert out.info["valid_tool_calls"] == 1 and out.info["errors"] == []


def test_each_failure_kind_becomes_observation():
    cases = {
        "<tool_call>{not json</tool_call>": "not valid JSON",
        _call("nope", {}): "unknown tool 'nope'",
        _call("search", {"query": 3}): "invalid arguments",
        _call("search", {}): "'query' is a required property",
        _call("boom", {}): "RuntimeError: kaput",
        _call("sleepy", {}): "timed out",
        "<tool_call>[1, 2]</tool_call>": "JSON object",
        "just some text": "no action found",
        "<tool_call>{\"name\": \"search\"": "unclosed <tool_call>",
    }
    for action, expected in cases.items():
        out = _env().step(action)
        assert not out.done and expected in out.observation, (action, out.observation)
        assert out.info["valid_tool_calls"] == 0


def test_several_calls_in_one_turn_all_run_up_to_cap():
    env = _env(max_calls=2)
    out = env.step(_call("search", {"query": "a"}) + _call("search", {"query": "b"}) + _call("search", {"query": "c"}))
    assert out.info["tool_calls"] == 2 and out.info["valid_tool_calls"] == 2
    assert out.observation.count("Doc about it") == 2 and "1 extra call(s) ignored" in out.observation


def test_answer_ends_episode_tag_format():
    env = _env("tag", tools=[EchoSearch()])
    out = env.step("I think <answer> Paris </answer>")
    assert out.done and out.answer == "Paris" and out.observation is None


def test_tag_format_search_and_errors():
    env = _env("tag", tools=[EchoSearch("hello")])
    assert env.step("<search>Karivo</search>").observation == "<information>hello</information>"
    assert "empty search query" in env.step("<search>  </search>").observation
    assert "unclosed <search>" in env.step("<search>Karivo").observation


def test_process_rewards_first_hit_only_and_ablation():
    reward = RewardConfig(valid_call_reward=0.1, retrieval_hit_reward=0.5)
    env = _env(reward=reward)
    assert env.step(_call("search", {"query": "Karivo"})).reward == 0.6  # valid + new supporting doc
    assert env.step(_call("search", {"query": "Karivo"})).reward == 0.1  # no second hit reward
    off = _env(reward=RewardConfig(valid_call_reward=0.1, retrieval_hit_reward=0.5, process_reward=False))
    assert off.step(_call("search", {"query": "Karivo"})).reward == 0.0


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400), st.sampled_from(["tag", "hermes"]))
def test_arbitrary_text_never_raises(text, fmt):
    out = _env(fmt, tools=[EchoSearch()]).step(text)
    assert out.done or isinstance(out.observation, str)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(["<tool_call>", "</tool_call>", "<search>", "</search>", "<answer>", "{", "}",
                                 '"name"', ":", '"search"', '"arguments"', "[", "]", "null", "1e999", "\\u0000"]),
                max_size=60), st.sampled_from(["tag", "hermes"]))
def test_tag_soup_never_raises(parts, fmt):
    out = _env(fmt, tools=[EchoSearch()]).step("".join(parts))
    assert out.done or isinstance(out.observation, str)


def test_tool_runner_clips_huge_results():
    runner = ToolRunner([EchoSearch("x" * 100_000)], max_result_chars=1000)
    from agent_r1.tools.runner import ToolCall

    res = runner.run([ToolCall("search", {"query": "q"})])[0]
    assert len(res.text) < 1100 and res.metadata["clipped"]
    assert runner.stats["search"]["calls"] == 1
