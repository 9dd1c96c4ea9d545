"""`env.kind: openai_agent` without a model: agent functions (sync and async, failing, returning a reward or
an answer) run through the endpoint over an engine that always writes the same answer."""

from __future__ import annotations

import copy

import pytest

from agent_r1.agents.agent_ref import check_agent_ref, load_agent
from agent_r1.agents.assemble import agent_metrics
from agent_r1.agents.rollout import AgentRollout
from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig

SAMPLES = [{"id": "q0", "question": "Where was Karivo born?", "answers": ["Telumas"]},
           {"id": "q1", "question": "Where was Bamena born?", "answers": ["Orvania"]}]
ROLLOUT = RolloutConfig(n_samples=3, max_tokens_per_turn=8, max_total_tokens=400)


class AnswerEngine:
    """Writes `text` then the end of turn, whatever the prompt; counts its calls."""

    def __init__(self, tokenizer, text="Telumas"):
        self.codec, self.text, self.prompts = ChatCodec(tokenizer), text, 0

    def generate(self, prompts, params):
        self.prompts += len(prompts)
        ids = self.codec.encode(self.text) + [self.codec.eos_token_id]
        return [GenerationOutput(list(ids), [-0.5] * len(ids), "stop", "<|im_end|>") for _ in prompts]


@pytest.fixture(scope="module")
def codec(tiny_model):
    tokenizer = copy.deepcopy(tiny_model[1])
    tokenizer.chat_template = QWEN25_TEMPLATE
    return ChatCodec(tokenizer)


def ask(client, sample):
    reply = client.chat.completions.create(model="policy", messages=[{"role": "user", "content": sample["question"]}])
    return reply.choices[0].message.content


async def ask_async(client, sample):
    reply = await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": sample["question"]}])
    return reply.choices[0].message.content


def _rollout(codec, agent, samples=SAMPLES, **kw):
    make_env = AgentRollout(agent, concurrency=4, **kw)
    try:
        return make_env, run_rollout(AnswerEngine(codec.tokenizer), codec, make_env, samples, ROLLOUT,
                                     RewardConfig(metric="em"))
    finally:
        make_env.close()


@pytest.mark.parametrize("agent", [ask, ask_async], ids=["sync", "async"])
def test_answers_are_scored_and_grouped_by_prompt(codec, agent):
    make_env, trajs = _rollout(codec, agent)
    assert [t.sample_id for t in trajs] == ["q0"] * 3 + ["q1"] * 3  # run_rollout's shape: grouped by prompt
    assert [t.outcome_reward for t in trajs] == [1.0] * 3 + [0.0] * 3  # "Telumas" is q0's answer only
    assert all(t.answer == "Telumas" and t.stop_reason == "agent" for t in trajs)
    for sample, calls, steps in make_env.last_sessions:  # the trained actions are the recorded completions
        assert [t.action_ids for s in steps for t in s.turns] == [c.completion_ids for c in calls]
    m = agent_metrics(trajs)
    assert m["agent/sessions"] == 6 and m["agent/calls"] == 6 and m["agent/drift"] == 0 and m["agent/errors"] == 0


def test_a_failing_session_gets_reward_0_and_one_without_calls_is_dropped(codec):
    def agent(client, sample):
        if sample["id"] == "q1":
            raise RuntimeError("harness crashed before asking")
        ask(client, sample)
        if sample["id"] == "q0":
            raise ValueError("harness crashed after a call")

    make_env, trajs = _rollout(codec, agent)
    assert [t.sample_id for t in trajs] == ["q0"] * 3
    assert all(t.outcome_reward == 0.0 and t.stop_reason == "agent_error" for t in trajs)
    m = agent_metrics(trajs)
    assert m["agent/errors"] == 6 and m["agent/empty"] == 3 and m["agent/sessions"] == 3


def test_a_reward_is_taken_as_returned_and_a_wrong_type_is_an_error(codec):
    def agent(client, sample):
        ask(client, sample)
        return 0.25 if sample["id"] == "q0" else {"reward": 1}

    _, trajs = _rollout(codec, agent)
    assert [t.outcome_reward for t in trajs] == [0.25] * 3 + [0.0] * 3
    assert agent_metrics(trajs)["agent/errors"] == 3


def test_no_session_calling_the_endpoint_fails_with_the_reason(codec):
    def agent(client, sample):
        raise KeyError("no_such_column")

    with pytest.raises(RuntimeError, match="none of the 6 agent sessions.*no_such_column"):
        _rollout(codec, agent)


def test_a_slow_agent_times_out_as_an_error(codec):
    import time

    def agent(client, sample):
        ask(client, sample)
        time.sleep(2 if sample["id"] == "q1" else 0)
        return "Telumas"

    _, trajs = _rollout(codec, agent, timeout_s=1.0)
    assert [t.stop_reason for t in trajs] == ["agent"] * 3 + ["agent_error"] * 3


def test_env_agent_is_checked_at_load_and_imported_at_startup(tmp_path):
    for bad in ["", "module", "a.b:c.d", "a b:c"]:
        with pytest.raises(ValueError, match="env.agent="):
            check_agent_ref(bad)
    with pytest.raises(ValueError, match="env.agent=''"):
        load_config(None, {"env.kind": "openai_agent"})
    cfg = load_config(None, {"env.kind": "openai_agent", "env.agent": "no_such_pkg.mod:agent"})
    with pytest.raises(ImportError, match="env.agent='no_such_pkg.mod:agent': importing module"):
        make_env_factory(cfg, None)
    with pytest.raises(ImportError, match="has no function 'nope'"):
        load_agent("examples.qa_agent:nope")
    cfg = load_config(None, {"env.kind": "openai_agent", "env.agent": "examples.qa_agent:agent"})
    make_env = make_env_factory(cfg, None)
    assert isinstance(make_env, AgentRollout) and make_env.agent.__name__ == "agent"
    with pytest.raises(TypeError, match="no per-sample env"):
        make_env(SAMPLES[0])


class SearchThenAnswerEngine(AnswerEngine):
    """Calls search (as Qwen2.5's template writes a call) until a tool result is in the prompt, then answers."""

    CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "Karivo born"}}\n</tool_call>'

    def generate(self, prompts, params):
        outs = []
        for p in prompts:
            text = "Telumas" if "<tool_response>" in self.codec.decode(p) else self.CALL
            ids = self.codec.encode(text) + [self.codec.eos_token_id]
            outs.append(GenerationOutput(ids, [-0.5] * len(ids), "stop", "<|im_end|>"))
        return outs


def test_the_example_agent_searches_the_rows_docs_and_continues_one_trajectory(codec):
    from examples.qa_agent import agent

    samples = [{**SAMPLES[0], "docs": [{"title": "Karivo", "text": "Karivo was born in Telumas."},
                                       {"title": "Bamena", "text": "Bamena was born in Orvania."}]}]
    make_env = AgentRollout(agent, concurrency=4)
    try:
        trajs = run_rollout(SearchThenAnswerEngine(codec.tokenizer), codec, make_env, samples,
                            RolloutConfig(n_samples=3, max_tokens_per_turn=64, max_total_tokens=4096),
                            RewardConfig(metric="em"))
    finally:
        make_env.close()
    assert len(trajs) == 3 and all(t.outcome_reward == 1.0 and len(t.turns) == 2 for t in trajs)
    assert "Karivo was born in Telumas" in trajs[0].turns[0].observation_text  # the agent's own tool ran
    m = agent_metrics(trajs)
    assert m["agent/calls"] == 6 and m["agent/steps"] == 3 and m["agent/drift"] == 0


def test_the_endpoint_generates_under_the_callers_autocast(codec):
    import torch

    class Probe(AnswerEngine):
        def generate(self, prompts, params):
            seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
            return super().generate(prompts, params)

    seen = []
    make_env = AgentRollout(ask, concurrency=4)
    engine = Probe(codec.tokenizer)
    try:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):  # the trainer's bf16
            run_rollout(engine, codec, make_env, SAMPLES[:1], ROLLOUT, RewardConfig())
        assert seen and all(s == (True, torch.bfloat16) for s in seen)
        seen.clear()
        run_rollout(engine, codec, make_env, SAMPLES[:1], ROLLOUT, RewardConfig())  # fp32: none
        assert seen and not any(on for on, _ in seen)
    finally:
        make_env.close()
