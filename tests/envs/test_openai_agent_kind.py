"""`env.kind: openai_agent` as docs/agents.md's three lines describe it: rows that name their own tools
load without `env.tools` listing them (the agent brings its tools), a locally built model gets a chat
template that renders tool calls, and `env.mcp_servers` handed only to an agent that takes `tools`."""

from __future__ import annotations

import json
import sys

import pytest

from agent_r1.config import load_config
from agent_r1.envs.samples import load_questions
from agent_r1.envs.tool_env import EnvConfig
from agent_r1.models.chat_template import CHAT_TEMPLATES

AGENT = {"env.kind": "openai_agent", "env.agent": "examples.qa_agent:agent"}


def _rows(tmp_path):
    path = tmp_path / "train.jsonl"
    row = {"id": "a0", "question": "What is 12 * 3?", "answers": ["36"], "plan": ["12 * 3"],
           "env": {"tools": ["calculator"], "reward": {"metric": "numeric"}}}
    path.write_text(json.dumps(row) + "\n")
    return path


def test_rows_naming_their_tools_load_under_openai_agent(tmp_path):
    """env.tools is the built-in env's; an agent's rows may name tools the run does not list."""
    rows = load_questions(_rows(tmp_path), env=EnvConfig(kind="openai_agent", agent="m:f", tools=["search"]))
    assert rows[0].to_dict()["env"]["tools"] == ["calculator"]


def test_rows_still_narrow_the_builtin_envs_tools(tmp_path):
    with pytest.raises(ValueError, match="calculator"):
        load_questions(_rows(tmp_path), env=EnvConfig(kind="tool", tools=["search"]))


def test_rows_under_openai_agent_are_still_typed(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "b", "question": "q", "answers": ["1"], "env": {"tools": "calculator"}}) + "\n")
    with pytest.raises(ValueError, match="tools"):
        load_questions(path, env=EnvConfig(kind="openai_agent", agent="m:f"))


def _renders_tool_calls(template: str) -> bool:
    from jinja2 import Environment

    message = {"role": "assistant", "content": "",
               "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {"e": "1"}}}]}
    return "calculator" in Environment().from_string(template).render(messages=[message], tools=None)


def test_openai_agent_defaults_to_a_template_that_renders_tool_calls():
    cfg = load_config(None, dict(AGENT))
    assert cfg.model.chat_template == "qwen2.5-brief"
    assert _renders_tool_calls(CHAT_TEMPLATES[cfg.model.chat_template])


def test_template_default_leaves_explicit_choices_and_other_kinds_alone():
    assert load_config(None, {**AGENT, "model.chat_template": "qwen2.5"}).model.chat_template == "qwen2.5"
    assert load_config(None, {**AGENT, "model.chat_template": "chatml"}).model.chat_template == "chatml"
    assert load_config(None, {}).model.chat_template == "chatml"
    # a model folder brings its own template: the key is left as given
    named = load_config(None, {**AGENT, "model.name_or_path": "Qwen/Qwen2.5-0.5B-Instruct"})
    assert named.model.chat_template == "chatml"


def test_mcp_servers_load_under_openai_agent_and_an_agent_without_tools_is_refused_before_they_start(tmp_path):
    from agent_r1.envs.factory import make_env_factory

    started = tmp_path / "started"
    server = {"name": "calc", "command": sys.executable, "args": ["-c", f"open({str(started)!r}, 'w')"]}
    cfg = load_config(None, {**AGENT, "env.mcp_servers": [server]})  # no longer refused at load
    assert cfg.env.mcp_servers[0].name == "calc"
    with pytest.raises(ValueError, match=r"env\.mcp_servers is set, but env\.agent=.* has no `tools` parameter"):
        make_env_factory(cfg, None)
    assert not started.exists()  # refused before any server process ran
