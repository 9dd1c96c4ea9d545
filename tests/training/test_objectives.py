"""The objectives beyond GRPO in the trainer: one iteration each of GSPO, CISPO and Dr. GRPO on the tiny
model (the maths is checked in tests/algos/test_gspo_cispo.py and test_dr_grpo.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.training.trainer import RLTrainer
from tests.rollout_helpers import QA_SAMPLES, make_env_factory, trainer_config

pytestmark = pytest.mark.usefixtures("one_thread")

OBJECTIVES = {
    "gspo": {"algo.policy_loss": "gspo", "algo.clip_low": 3e-4, "algo.clip_high": 4e-4,
             "algo.loss_agg": "seq-mean-token-mean"},
    "cispo": {"algo.policy_loss": "cispo", "algo.clip_high": 4.0},
    "dr_grpo": {"algo.adv_estimator": "dr_grpo", "algo.loss_agg": "seq-mean-token-sum-norm"},
}


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_an_iteration_trains(tiny_model, tmp_path, name):
    model, tok = tiny_model
    cfg = trainer_config(tmp_path, **{"rollout.temperature": 1.5, "train.micro_batch_size": 5,
                                      "train.ppo_epochs": 2, "train.minibatch_size": 6, **OBJECTIVES[name]})
    torch.manual_seed(0)
    trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(), QA_SAMPLES)
    assert trainer.norm_tokens == cfg.rollout.max_total_tokens  # loss_norm_tokens 0: the rollout's budget
    trajs = trainer.rollout()
    batch = trainer.prepare(trajs)
    batch["advantages"] = torch.randn(len(trajs), 1) * batch["adv_mask"]  # a signal on every row (random rewards may tie)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    m = trainer.update(batch)
    assert all(v == v and abs(v) != float("inf") for v in m.values()), m
    assert 0.0 <= m["clipfrac"] <= 1.0 and m["grad_norm"] > 0.0
    moved = sum(float((a - b.detach()).abs().sum()) for a, b in zip(before, trainer.model.parameters()))
    assert moved > 0.0
    if name == "gspo":  # 2 epochs: the second epoch's sequence ratios leave 1, but stay near it
        assert 0.9 < m["ratio_mean"] < 1.1


def test_dr_grpo_loss_norm_tokens_scales_the_policy_loss(tiny_model, tmp_path):
    """policy_loss = sum of token losses / (rows x L): doubling L halves it (same batch, same weights)."""
    model, tok = tiny_model
    losses = {}
    batch = None
    for norm in (100, 200):
        cfg = trainer_config(tmp_path, **{**OBJECTIVES["dr_grpo"], "algo.loss_norm_tokens": norm,
                                          "train.micro_batch_size": 5})
        trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(), QA_SAMPLES)
        assert trainer.norm_tokens == norm
        if batch is None:
            batch = trainer.prepare(trainer.rollout())
            batch["advantages"] = torch.linspace(-1, 1, batch["adv_mask"].shape[0])[:, None] * batch["adv_mask"]
        record, _ = trainer._backward_minibatch(batch, torch.arange(batch["input_ids"].shape[0]))
        losses[norm] = record["policy_loss"]
    assert losses[100] != 0.0
    assert losses[200] == pytest.approx(losses[100] / 2, rel=1e-5)
