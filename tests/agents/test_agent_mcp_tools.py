"""`env.mcp_servers` under `env.kind: openai_agent`: an agent with a `tools` parameter gets the run's MCP
tools (agents/agent_tools.py). A real MCP server (tests/tools/test_mcp.py's, over stdio) answers the
calls the policy wrote; the session stays one trajectory with the server's answer in it; closing the
env factory ends the server; calls that cannot run come back as text, as the built-in env shows them."""

from __future__ import annotations

import copy
import sys

import pytest

pytest.importorskip("mcp")

from agent_r1.agents.agent_tools import AgentTools, takes_tools  # noqa: E402
from agent_r1.agents.assemble import agent_metrics  # noqa: E402
from agent_r1.config import load_config  # noqa: E402
from agent_r1.envs.factory import make_env_factory  # noqa: E402
from agent_r1.models.qwen_template import QWEN25_TEMPLATE  # noqa: E402
from agent_r1.rewards.scoring import RewardConfig  # noqa: E402
from agent_r1.rollout.chat import ChatCodec  # noqa: E402
from agent_r1.rollout.engine import GenerationOutput  # noqa: E402
from agent_r1.rollout.loop import run_rollout  # noqa: E402
from agent_r1.sampling import RolloutConfig  # noqa: E402
from tests.tools.test_mcp import SERVER, server_pids  # noqa: E402

SAMPLE = {"id": "q0", "question": "Where did Ada live?", "answers": ["London"]}
AGENT = "tests.agents.test_agent_mcp_tools:lookup_agent"


def lookup_agent(client, sample, tools):
    """Offers the run's MCP tools, runs the calls the policy writes through them, answers after."""
    messages = [{"role": "user", "content": sample["question"]}]
    for _ in range(3):
        msg = client.chat.completions.create(model="policy", messages=messages, tools=tools.schemas).choices[0].message
        if not msg.tool_calls:
            return msg.content or ""
        messages.append(msg.model_dump(exclude_none=True))
        for call in msg.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": tools.call(call.function.name, call.function.arguments)})
    return ""


class LookupThenAnswer:
    """Calls the server's `lookup` until a tool result is in the prompt, then writes that result."""

    def __init__(self, tokenizer):
        self.codec = ChatCodec(tokenizer)

    def generate(self, prompts, params):
        outs = []
        for p in prompts:
            text = self.codec.decode(p)
            answer = "London" if "<tool_response>\nLondon" in text else None
            out = answer or '<tool_call>\n{"name": "lookup", "arguments": {"name": "ada"}}\n</tool_call>'
            ids = self.codec.encode(out) + [self.codec.eos_token_id]
            outs.append(GenerationOutput(ids, [-0.5] * len(ids), "stop", "<|im_end|>"))
        return outs


@pytest.fixture
def codec(tiny_model):
    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = QWEN25_TEMPLATE
    return ChatCodec(tokenizer)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "kb_server.py"
    path.write_text(SERVER)
    return path


def _cfg(script):
    server = {"name": "kb", "command": sys.executable, "args": [str(script)], "timeout_s": 8.0}
    return load_config(None, {"env.kind": "openai_agent", "env.agent": AGENT, "env.mcp_servers": [server],
                              "rollout.max_tokens_per_turn": 64, "rollout.max_total_tokens": 4096})


def test_the_agent_calls_the_runs_mcp_server_within_one_trajectory(codec, script):
    make_env = make_env_factory(_cfg(script), None)
    try:
        assert server_pids(script), "the run's MCP server was started with the env factory"
        trajs = run_rollout(LookupThenAnswer(codec.tokenizer), codec, make_env, [SAMPLE],
                            RolloutConfig(n_samples=2, max_tokens_per_turn=64, max_total_tokens=4096),
                            RewardConfig(metric="em"))
    finally:
        make_env.close()
    assert len(trajs) == 2 and all(t.outcome_reward == 1.0 and len(t.turns) == 2 for t in trajs)
    assert "London" in trajs[0].turns[0].observation_text  # the server's answer, masked out of the loss
    m = agent_metrics(trajs)
    assert m["agent/steps"] == 2 and m["agent/drift"] == 0
    assert not server_pids(script), "closing the env factory ends the server"


def test_calls_that_cannot_run_come_back_as_text(script):
    from agent_r1.tools.mcp_tools import McpServerConfig, connect_mcp_tools

    found, conns = connect_mcp_tools([McpServerConfig(name="kb", command=sys.executable, args=[str(script)],
                                                      timeout_s=8.0)], run_timeout_s=10.0)
    try:
        tools = AgentTools(found)
        assert {s["function"]["name"] for s in tools.schemas} == {"lookup", "refuse", "broken", "slow", "die"}
        assert tools.call("lookup", '{"name": "grace"}') == "New York"
        assert tools.call("lookup", {"name": "ada"}) == "London"
        assert "unknown tool 'nope'" in tools.call("nope", "{}")
        assert "not JSON" in tools.call("lookup", "{name: ada")
        assert "must be a JSON object" in tools.call("lookup", "[1]")
        assert "no record may be shown" in tools.call("refuse", '{"name": "ada"}')
    finally:
        for c in conns:
            c.close()


def test_which_agents_take_the_tools():
    async def async_agent(client, sample, tools): ...

    assert takes_tools(lookup_agent) and takes_tools(async_agent) and takes_tools(lambda c, s, **kw: None)
    assert not takes_tools(lambda client, sample: None)
    # a third parameter of another name (examples/qa_agent.py's max_turns) is not handed the tools
    assert not takes_tools(lambda client, sample, max_turns=3: None)


def test_the_warm_starts_demos_call_the_server_too(codec, script):
    """`agent-r1 sft` under openai_agent plays the agent over a scripted policy; with env.mcp_servers its
    demo sessions call the run's servers, as its RL sessions will (runs/warm_start.py played_demos)."""
    from agent_r1.envs.factory import agent_mcp_tools
    from agent_r1.training.agent_demos import agent_demos

    cfg = _cfg(script)
    tools, conns = agent_mcp_tools(cfg, lookup_agent)
    # the plan's value at the start of the question: the demo copies it as the context spells it, here
    # without the leading space a word has mid-sentence (the server looks names up exactly)
    row = {**SAMPLE, "question": "Ada lived in which city?", "plan": ["Ada"]}
    (demo,), stats = agent_demos(lookup_agent, [row], codec, cfg.rollout, cfg.reward,
                                 0.0, 0, concurrency=1, tools=tools, connections=conns)
    assert stats.failed == 0 and stats.steps == 1
    assert "lookup" in demo.turns[0].action_text and "London" in demo.turns[0].observation_text
    assert not server_pids(script), "the demos' connections end with them"
