"""A trajectory the sequence mask rejects leaves the response mask, as in verl: the update (policy
loss, its token-mean normaliser, entropy, KL) is the update of the batch without that row."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.training.trainer import RLTrainer
from tests.rollout_helpers import make_env_factory
from tests.training.test_trainer import SAMPLES, _cfg, _warm_model


def _rows(batch: dict, keep: torch.Tensor) -> dict:
    n = batch["input_ids"].shape[0]
    return {k: v[keep] if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == n else v for k, v in batch.items()}


def test_a_rejected_row_trains_as_if_absent(tiny_model, tmp_path):
    torch.manual_seed(0)
    model, tok = _warm_model(tiny_model)
    cfg = _cfg(tmp_path, **{"train.iterations": 1, "train.ppo_epochs": 1, "train.minibatch_size": 64,
                            "algo.entropy_coef": 0.01, "algo.rollout_correction.mode": "seq_mask"})
    trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    trajs = trainer.rollout()
    for turn in trajs[0].turns:  # an engine 20x more confident than the trainer on every token: rejected
        turn.action_logprobs = [lp + 3.0 for lp in turn.action_logprobs]
    batch = trainer.prepare(trajs)
    assert batch["offpolicy_metrics"]["rollout_corr/seq_masked_frac"] == pytest.approx(1 / len(trajs))
    assert batch["loss_mask"][0].sum() == 0 and batch["loss_mask"][1:].sum() > 0
    kept = torch.arange(len(trajs)) != 0
    other = copy.deepcopy(trainer)
    with_row, without_row = trainer.update(batch), other.update(_rows(batch, kept))
    for key in ("policy_loss", "entropy"):
        assert with_row[key] == pytest.approx(without_row[key], abs=1e-6), key
    for (name, a), b in zip(trainer.model.named_parameters(), other.model.parameters()):
        assert torch.allclose(a, b, atol=1e-5), name  # Adam divides float rounding by tiny moments
