"""GRPO trains an Agents-SDK-style agent (Responses API, function tools) and a streaming chat agent
(tests/agents/api_style_agents.py) through the endpoint, `env.kind: openai_agent`, 2 iterations on a tiny
model: the trained trajectories are the recorded calls, their action masks cover exactly the sampled
tokens (tool results and template glue masked), and the run's metrics are there. A random tiny model's
replies rarely re-tokenise as sampled, but the agents send them back unchanged and the endpoint writes
them as sampled (agents/replies.py): no session splits (agent/drift 0). The same agents also run on a
scripted engine that searches then answers: one trajectory per session, its tool results and the
follow-up question masked between the trained turns."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.agents.assemble import agent_metrics
from agent_r1.agents.rollout import AgentRollout
from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig
from agent_r1.training.trainer import RLTrainer
from agent_r1.trajectory import collate
from tests.agents import api_style_agents
from tests.agents.test_openai_agent import SearchThenAnswerEngine
from tests.agents.test_openai_agent_training import check_trained_are_the_recorded_calls

pytestmark = pytest.mark.usefixtures("one_thread")

NAMES = ["Karivo", "Bamena", "Tolusa", "Meriko"]
SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"],
            "docs": [{"title": n, "text": f"{n} was born in Telumas."}]} for i, n in enumerate(NAMES)]
SESSIONS = 8  # prompts_per_iter x n_samples


def _check_masks(step) -> None:
    """The action mask is 1 on the sampled tokens exactly, in order; 0 on the prompt and observations."""
    ids, mask = step.token_ids, step.action_mask
    assert len(ids) == len(mask)
    trained = [i for i, m in zip(ids, mask) if m]
    assert trained == [t for turn in step.turns if not turn.masked for t in turn.action_ids]
    assert ids[:len(step.prompt_ids)] == step.prompt_ids and not any(mask[:len(step.prompt_ids)])
    for turn in step.turns[:-1]:  # between two calls: what the harness added, never trained
        assert turn.observation_ids


@pytest.mark.parametrize("agent, kind", [("responses_agent", "responses"), ("streaming_agent", "streamed"),
                                         ("responses_streaming_agent", "responses_streamed")])
def test_grpo_trains_an_agent_of_each_api_style_through_the_endpoint(tiny_model, tmp_path, agent, kind):
    torch.manual_seed(0)
    model, tok = copy.deepcopy(tiny_model[0]), copy.deepcopy(tiny_model[1])
    tok.chat_template = QWEN25_TEMPLATE
    cfg = load_config(None, {
        "env.kind": "openai_agent", "env.agent": f"tests.agents.api_style_agents:{agent}",
        "env.agent_concurrency": 8, "reward.metric": "em", "algo.adv_estimator": "grpo",
        "algo.entropy_coef": 0.01, "train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 2,
        "rollout.n_samples": 4, "rollout.max_tokens_per_turn": 8, "rollout.max_total_tokens": 2048,
        "train.ppo_epochs": 1, "train.minibatch_size": 64, "train.lr": 1e-3, "train.eval_every": 0,
        "train.threads": 1, "train.precision": "fp32"})
    make_env = make_env_factory(cfg, None)
    trainer = RLTrainer(cfg, model, tok, make_env, SAMPLES)
    api_style_agents.CALLS.clear()
    try:
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        first = trainer.train_step()
        assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
        second = trainer.train_step()
    finally:
        make_env.close()
    assert trainer.iteration == 2
    for m in (first, second):
        assert m["agent/sessions"] == SESSIONS and m["agent/errors"] == 0 and m["agent/empty"] == 0
        assert m["agent/calls"] >= 2 * SESSIONS  # each session asks at least twice (the self-check)
        assert m["agent/drift"] == 0 and "grad_norm" in m and "rollout/logprob_diff_max" in m
    # every call went through the API the agent uses, and every call it made was recorded
    assert api_style_agents.CALLS[kind] == first["agent/calls"] + second["agent/calls"]
    trained = check_trained_are_the_recorded_calls(trainer, make_env)
    for _, _, steps in make_env.last_sessions:
        for step in steps:
            _check_masks(step)
    batch = collate(trained, pad_token_id=tok.pad_token_id or 0)
    assert batch["action_mask"].sum(1).tolist() == [float(sum(t.action_mask)) for t in trained]
    assert second["rollout/logprob_diff_max"] <= 1e-4, second["rollout/logprob_diff_max"]


@pytest.mark.parametrize("agent", [api_style_agents.responses_agent, api_style_agents.streaming_agent,
                                   api_style_agents.responses_streaming_agent],
                         ids=["responses", "streamed", "responses_streamed"])
def test_each_api_style_agents_session_is_one_trajectory_with_its_observations_masked(tiny_model, agent):
    tok = copy.deepcopy(tiny_model[1])
    tok.chat_template = QWEN25_TEMPLATE
    codec = ChatCodec(tok)
    make_env = AgentRollout(agent, concurrency=4)
    try:  # searches until a tool result is in the prompt, then answers; the agent asks its check once
        trajs = run_rollout(SearchThenAnswerEngine(tok), codec, make_env, SAMPLES[:2],
                            RolloutConfig(n_samples=2, max_tokens_per_turn=64, max_total_tokens=4096),
                            RewardConfig(metric="em"))
    finally:
        make_env.close()
    m = agent_metrics(trajs)
    assert m["agent/calls"] == 12 and m["agent/steps"] == 4 and m["agent/drift"] == 0 and m["agent/errors"] == 0
    for traj in trajs:
        assert len(traj.turns) == 3 and traj.outcome_reward == 1.0
        assert "was born in Telumas" in traj.turns[0].observation_text  # the agent's own tool ran
        assert api_style_agents.CHECK in traj.turns[1].observation_text  # its follow-up question
        _check_masks(traj)
