"""GRPO trains the example agent (examples/qa_agent.py: the `openai` package only) through the endpoint:
`env.kind: openai_agent` for 2 iterations on a tiny model. What is trained is what the endpoint recorded,
and the trainer's log-probs of it agree with the engine's."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.models.qwen_template import QWEN25_TEMPLATE
from agent_r1.training.trainer import RLTrainer

pytestmark = pytest.mark.usefixtures("one_thread")

NAMES = ["Karivo", "Bamena", "Tolusa", "Meriko"]
SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"],
            "docs": [{"title": n, "text": f"{n} was born in Telumas."}]} for i, n in enumerate(NAMES)]


def test_grpo_trains_the_example_agent_through_the_endpoint(tiny_model, tmp_path):
    torch.manual_seed(0)
    model, tok = copy.deepcopy(tiny_model[0]), copy.deepcopy(tiny_model[1])
    tok.chat_template = QWEN25_TEMPLATE  # tools and tool messages through a real template
    cfg = load_config(None, {
        "env.kind": "openai_agent", "env.agent": "examples.qa_agent:agent", "env.agent_concurrency": 8,
        "reward.metric": "em", "algo.adv_estimator": "grpo", "algo.entropy_coef": 0.01,  # a step even at equal rewards
        "train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 2, "rollout.n_samples": 4,
        "rollout.max_tokens_per_turn": 8, "rollout.max_total_tokens": 2048, "train.ppo_epochs": 1,
        "train.minibatch_size": 64, "train.lr": 1e-3, "train.eval_every": 0, "train.threads": 1,
        "train.precision": "fp32"})
    make_env = make_env_factory(cfg, None)
    trainer = RLTrainer(cfg, model, tok, make_env, SAMPLES)
    try:
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        first = trainer.train_step()
        assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())  # the update ran
        second = trainer.train_step()
    finally:
        make_env.close()
    assert trainer.iteration == 2
    for m in (first, second):
        assert m["agent/sessions"] == 8 and m["agent/calls"] >= 8 and "agent/drift" in m and "grad_norm" in m
        assert m["agent/errors"] == 0 and m["agent/empty"] == 0
    trained = check_trained_are_the_recorded_calls(trainer, make_env)
    ids = [t.sample_id for t in trained]  # grouped by prompt, as run_rollout returns them: GRPO's groups
    assert ids == sorted(ids, key=ids.index) and len(set(ids)) == 2
    print({k: v for k, v in second.items() if k.startswith(("agent/", "rollout/", "reward", "grad"))})
    # the engine sampled with the weights the trainer recomputes with (after iteration 1's update)
    assert second["rollout/logprob_diff_max"] <= 1e-4, second["rollout/logprob_diff_max"]


def check_trained_are_the_recorded_calls(trainer, make_env) -> list:
    """The trained trajectories are the recorded calls: prompts and actions token for token. Returns them."""
    trained = trainer.last_trajectories
    recorded = [s for _, _, steps in make_env.last_sessions for s in steps]
    assert [id(t) for t in trained] == [id(t) for t in recorded]
    for sample, calls, steps in make_env.last_sessions:
        assert [t.action_ids for s in steps for t in s.turns] == [c.completion_ids for c in calls]
        assert [t.action_logprobs for s in steps for t in s.turns] == [c.completion_logprobs for c in calls]
        assert steps[0].prompt_ids == calls[0].prompt_ids and steps[0].sample_id == sample["id"]
    return trained
