"""`algo.rollout_correction`: truncated per-token importance weights and a sequence mask for the
engine/trainer log-prob gap in synchronous training; nothing changes when the engines agree."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.algos.losses import RolloutCorrectionConfig, rollout_correction
from agent_r1.training.trainer import RLTrainer
from tests.precision_modes import both_cpu_modes
from tests.rollout_helpers import make_env_factory
from tests.training.test_trainer import SAMPLES, _cfg, _warm_model


def test_weights_truncate_tokens_and_mask_sequences_with_metrics():
    old = torch.zeros(3, 5)
    engine = torch.tensor([[0.0, 0.0, -2.0, 0.0, 0.0],   # one token the engine found 7x less likely: cut at 2
                           [0.0, 0.1, 0.1, 0.1, 0.0],    # a small gap: kept, weights exp(-0.1)
                           [0.0, 1.5, 1.5, 1.5, 0.0]])   # geometric-mean ratio exp(-1.5) < 0.5: masked
    sampled = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 1, 1, 0], [0, 1, 1, 1, 0]])
    w, m = rollout_correction(old, engine, sampled, RolloutCorrectionConfig(mode="token_truncate_seq_mask"))
    assert w[0, 2] == 2.0 and w[0, 1] == 1.0
    assert torch.allclose(w[1, 1:4], torch.full((3,), torch.exp(torch.tensor(-0.1)).item()))
    assert torch.equal(w[2, 1:4], torch.zeros(3))
    assert torch.equal(w[:, 0], torch.ones(3)) and torch.equal(w[:, 4], torch.ones(3))  # not sampled: 1
    assert m["rollout_corr/truncated_frac"] == pytest.approx(1 / 9)
    assert m["rollout_corr/seq_masked_frac"] == pytest.approx(1 / 3)
    none, metrics = rollout_correction(old, engine, sampled, RolloutCorrectionConfig())
    assert none is None and metrics == {}
    with pytest.raises(ValueError, match="rollout_correction.mode"):
        RolloutCorrectionConfig(mode="tis")


def test_agreeing_engines_get_weight_one():
    logp = torch.randn(4, 6)
    sampled = (torch.rand(4, 6) > 0.3).long()
    for mode in ("token_truncate", "seq_mask", "token_truncate_seq_mask"):
        w, m = rollout_correction(logp, logp.clone(), sampled, RolloutCorrectionConfig(mode=mode))
        assert torch.equal(w, torch.ones_like(w)) and m["rollout_corr/seq_masked_frac"] == 0.0


@both_cpu_modes  # test_trainer._cfg pins fp32
def test_the_correction_changes_no_update_when_engine_and_trainer_agree(tiny_model, tmp_path):
    """The transformers engine agrees with the trainer up to float rounding: the corrected update
    equals the uncorrected one to within that rounding, and the metrics say nothing was cut."""
    model, tok = _warm_model(tiny_model)
    runs = {}
    for mode in ("none", "token_truncate_seq_mask"):
        torch.manual_seed(0)
        cfg = _cfg(tmp_path / mode, **{"train.iterations": 1, "algo.rollout_correction.mode": mode})
        trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
        runs[mode] = (trainer.train_step(), trainer.model)
    metrics = runs["token_truncate_seq_mask"][0]
    assert metrics["rollout_corr/truncated_frac"] == 0.0 and metrics["rollout_corr/seq_masked_frac"] == 0.0
    assert metrics["rollout_corr/weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["policy_loss"] == pytest.approx(runs["none"][0]["policy_loss"], abs=1e-5)
    for (name, a), b in zip(runs["none"][1].named_parameters(), runs["token_truncate_seq_mask"][1].parameters()):
        assert torch.allclose(a, b, atol=1e-5), name
