"""One warm start for the built-in hermes env and the endpoint's openai agent (the learning benchmark's endpoint rows).

Demos in `sft.demo_style: chat` write each action as the chat template writes an assistant turn. A policy
that writes them (a scripted engine honouring the rollout's stops) gets the same token ids in the built-in
env as through the endpoint with the benchmark's agent (benchmarks/agents/qa_search_agent.py) and its
search service: the prompt, the calls, the tool results cut to the observation budget, the answer."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from agent_r1.agents.agent_ref import load_agent
from agent_r1.agents.rollout import AgentRollout
from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.models.chat_template import CHAT_TEMPLATES
from agent_r1.retrieval.base import Hit
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.rollout.loop import run_rollout
from agent_r1.training.demos import build_demos, chat_turn
from benchmarks.agents.search_service import SearchService
from benchmarks.endpoint_rows import AGENT

SAMPLE = {"id": "q0", "question": "In which country was Karivo born?", "answers": ["Velmora"],
          "plan": ["Karivo", "Telumas"]}
DOCS = [Hit("d0", "Karivo", "Karivo was born in Telumas. " + "Karivo kept bees and wrote letters. " * 6, 1.0),
        Hit("d1", "Telumas", "Telumas is a city in Velmora. " + "Telumas is known for its bridges. " * 6, 1.0)]


class Docs:
    """A retriever over DOCS: the documents whose title is a word of the query."""

    def search(self, queries, k):
        return [[d for d in DOCS if d.title in q.split()][:k] for q in queries]


class DemoEngine:
    """Writes the demo's actions in turn (the n-th assistant turn of a prompt gets the n-th action), each
    cut after the first stop id or stop string the caller asked for, as a real engine stops."""

    def __init__(self, tokenizer, actions):
        self.codec, self.actions = ChatCodec(tokenizer), actions

    def generate(self, prompts, params, **_):
        outs = []
        for prompt in prompts:
            turn = self.codec.decode(prompt).count("<|im_start|>assistant") - 1
            ids, out = self.codec.encode(self.actions[turn]), []
            for i in ids:
                out.append(i)
                text = self.codec.decode(out)
                if i in params.stop_token_ids or any(text.endswith(s) for s in params.stop_strings or ()):
                    break
            outs.append(GenerationOutput(out, [-0.1] * len(out), "stop"))
        return outs


@pytest.fixture(params=["qwen2.5", "qwen2.5-brief"])
def qwen_tok(tiny_model, request):
    """Qwen2.5's template, and the one the learning rows use (Qwen2.5's turns, a tools block of names)."""
    tok = copy.deepcopy(tiny_model[1])
    tok.chat_template = CHAT_TEMPLATES[request.param]
    return tok


def test_chat_turns_are_written_as_the_template_writes_them(qwen_tok, tiny_model):
    call = chat_turn(qwen_tok, calls=[{"name": "search", "arguments": {"query": "Karivo"}}])
    assert call == '<tool_call>\n{"name": "search", "arguments": {"query": "Karivo"}}\n</tool_call><|im_end|>'
    assert chat_turn(qwen_tok, content="<answer> Velmora</answer>") == "<answer> Velmora</answer><|im_end|>"
    with pytest.raises(ValueError, match="renders an assistant message's tool_calls"):
        chat_turn(tiny_model[1], calls=[{"name": "search", "arguments": {"query": "Karivo"}}])  # ChatML drops them
    cfg = load_config(None, {"env.format": "tag"})
    with pytest.raises(ValueError, match="needs env.format=hermes"):
        build_demos([SAMPLE], make_env_factory(cfg, Docs()), ChatCodec(qwen_tok), "tag", 0.0, 0, 30, "chat")


def test_the_built_in_env_and_the_endpoint_agent_see_the_same_tokens(qwen_tok):
    cfg = load_config(None, {"env.format": "hermes", "env.format_instructions": False, "reward.metric": "em",
                             "rollout.max_tokens_per_turn": 64, "rollout.max_observation_tokens": 30,
                             "rollout.max_total_tokens": 2048, "rollout.max_turns": 4})
    codec, make_env = ChatCodec(qwen_tok), make_env_factory(cfg, Docs())
    (demo,) = build_demos([SAMPLE], make_env, codec, "hermes", 0.0, 0, 30, "chat")
    assert [t.action_ids[-1] for t in demo.turns] == [qwen_tok.eos_token_id] * 3  # every turn closed
    # a name in the call is spaced as in the question, so copying it copies token ids (byte-level BPE)
    assert '{"query": " Karivo"}' in demo.turns[0].action_text
    engine = DemoEngine(qwen_tok, [t.action_text for t in demo.turns])
    rollout = replace(cfg.rollout, n_samples=1)
    (ours,) = run_rollout(engine, codec, make_env, [SAMPLE], rollout, cfg.reward, greedy=True)
    assert ours.answer == "Velmora" and ours.outcome_reward == 1.0 and len(ours.turns) == 3
    assert any(t.observation_truncated for t in ours.turns)  # the budget cut a result: cut alike on both sides
    agent = AgentRollout(load_agent(AGENT), concurrency=1)
    try:
        with SearchService(make_env(SAMPLE), codec, rollout.max_observation_tokens, rollout.max_turns):
            steps = agent.run_rollout(engine, codec, [SAMPLE], rollout, cfg.reward, greedy=True)
    finally:
        agent.close()
    (theirs,) = steps  # one step: every call's prompt continued the tokens sampled before it
    assert theirs.answer == "Velmora" and theirs.outcome_reward == 1.0
    assert theirs.token_ids == demo.token_ids  # what SFT trained on is what the agent's policy sees
    # the env stops a call at </tool_call> and appends the end-of-turn token as glue; the endpoint's policy
    # samples it: the same ids, and the answer turn's own end-of-turn token besides
    assert theirs.token_ids[:-1] == ours.token_ids
    assert theirs.prompt_ids == ours.prompt_ids
