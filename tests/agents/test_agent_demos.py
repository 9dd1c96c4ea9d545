"""An openai_agent run's SFT demos are its agent's own sessions (training/agent_demos.py, runs/warm_start.py played_demos):
the agent runs, unchanged, against the endpoint over a scripted policy that writes the row's plan as calls
to the agent's own tool and argument, then the answer. The built-in env's demos would teach its system
prompt, tool schemas and results, which the outside arithmetic agent never sends."""

from __future__ import annotations

import copy
import json

import pytest

from agent_r1.training.agent_demos import agent_demos, string_arguments
from agent_r1.config import load_config
from agent_r1.models.chat_template import CHAT_TEMPLATES
from agent_r1.rollout.chat import ChatCodec
from tests.pipeline_helpers import unpinned_micro

ROW = {"id": "a0", "question": "Noah has 23 bags of 44 coins each and 17 loose coins. How many coins does Noah have?",
       "answers": ["1029"], "type": "mul_add", "plan": ["44 * 23", "1012 + 17"],
       "env": {"tools": ["calculator"], "reward": {"metric": "numeric"}}}
DEVELOPER = "Work it out with calc."
TOOLS = [{"type": "function", "function": {
    "name": "calc", "description": "arithmetic",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}, "digits": {"type": "integer"}},
                   "required": ["expr"]}}}]


def calc_agent(client, sample):
    """An agent of its own: a developer message in content parts, its own tool and argument names, results
    written as `= N`, and a final-answer step without tools."""
    messages = [{"role": "developer", "content": [{"type": "text", "text": DEVELOPER}]},
                {"role": "user", "content": [{"type": "text", "text": sample["question"]}]}]
    for _ in range(3):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls:
            expr = json.loads(call.function.arguments)["expr"]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"= {eval(expr)}"})  # noqa: S307
    return client.chat.completions.create(model="policy", messages=messages, tools=TOOLS,
                                          tool_choice="none").choices[0].message.content or ""


@pytest.fixture
def brief_codec(tiny_model):
    tok = copy.deepcopy(tiny_model[1])
    tok.chat_template = CHAT_TEMPLATES["qwen2.5-brief"]
    return ChatCodec(tok)


def test_string_arguments_read_the_requests_schemas():
    assert string_arguments(TOOLS) == {"calc": "expr"}
    assert string_arguments([{"type": "function", "function": {"name": "x", "parameters": {}}}]) == {}


def test_the_demo_is_the_agents_session(brief_codec):
    cfg = load_config(None, {"rollout.max_tokens_per_turn": 64, "rollout.max_total_tokens": 1024})
    (demo,), stats = agent_demos(calc_agent, [ROW], brief_codec, cfg.rollout, cfg.reward, 0.0, 0, concurrency=1)
    assert stats.sessions == 1 and stats.steps == 1 and stats.failed == 0 and stats.solved == 1
    text = brief_codec.decode(demo.token_ids)
    assert DEVELOPER in brief_codec.decode(demo.prompt_ids)  # the agent's developer message is the prompt's
    calls = [brief_codec.decode(t.action_ids) for t in demo.turns]
    assert '{"name": "calc", "arguments": {"expr": " 44 * 23"}}' in calls[0]  # its tool, its argument
    assert "= 1012" in brief_codec.decode(demo.turns[0].observation_ids)  # its tool's own result
    assert calls[2].startswith("<answer> 1029</answer>") and len(demo.turns) == 3
    assert demo.outcome_reward == 1.0 and "= 1029" in text


def test_guessing_sessions_answer_at_once(brief_codec):
    cfg = load_config(None, {"rollout.max_tokens_per_turn": 64, "rollout.max_total_tokens": 1024})
    rows = [{**ROW, "id": f"a{i}", "answers": [str(1000 + i)]} for i in range(4)]
    demos, stats = agent_demos(calc_agent, rows, brief_codec, cfg.rollout, cfg.reward, 1.0, 0, concurrency=2)
    assert stats.steps == 4 and all(len(d.turns) == 1 for d in demos)
    assert all(brief_codec.decode(d.turns[0].action_ids).startswith("<answer>") for d in demos)


def test_agent_sft_trains_on_the_agents_own_prompts(tmp_path, monkeypatch):
    """`agent-r1 sft` under openai_agent: the demos it trains on hold the agent's system message."""
    import examples.qa_agent as qa_agent
    from agent_r1.runs.warm_start import run_sft
    from agent_r1.training import sft

    seen = []

    def capture(model, tokenizer, demos, *args, **kwargs):
        seen.extend(tokenizer.decode(d.prompt_ids) for d in demos)
        return [1.0]

    monkeypatch.setattr(sft, "sft_train", capture)
    cfg = load_config(None, unpinned_micro(tmp_path, **{"sft.steps": 2, "env.kind": "openai_agent",
                                                        "env.agent": "examples.qa_agent:agent",
                                                        "sft.out_dir": str(tmp_path / "sft")}))
    run_sft(cfg)
    assert seen and all(qa_agent.SYSTEM in prompt for prompt in seen)


def test_an_agent_runs_warm_start_is_keyed_by_its_agent(tmp_path):
    """The demos are the agent's: another agent is another warm start, the same agent finds its own."""
    from agent_r1.runs.assembly import ensure_data
    from agent_r1.runs.lineage import hash_json
    from agent_r1.runs.run import Run
    from agent_r1.runs.warm_start import ingredients

    def key(agent: str, **extra) -> str:
        cfg = load_config(None, unpinned_micro(tmp_path, **{"sft.steps": 2, "env.kind": "openai_agent",
                                                            "env.agent": agent, **extra}))
        return hash_json(ingredients(cfg, ensure_data(cfg), Run(cfg).index_dir))

    qa = key("examples.qa_agent:agent")
    assert qa == key("examples.qa_agent:agent", **{"env.agent_concurrency": 3})
    assert qa != key("benchmarks.agents.qa_search_agent:agent")
