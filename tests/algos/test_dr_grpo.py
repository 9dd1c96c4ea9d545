"""Dr. GRPO: the "dr_grpo" estimator (group mean, no std) and the "seq-mean-token-sum-norm" loss
aggregation (a constant length L instead of each sequence's own), vs hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from agent_r1.algos import ADV_ESTIMATORS, AdvantageInputs, aggregate_loss, loss_denominator
from agent_r1.config import load_config

T = torch.tensor


def close(a, b, tol=1e-5):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32),
                               atol=tol, rtol=tol)


def test_dr_grpo_estimator_is_group_mean_without_std():
    scores = T([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    mask = torch.ones(8, 2)
    mask[2, 1] = 0.0
    x = AdvantageInputs(torch.zeros(8, 2), scores, mask, ["a"] * 4 + ["b"] * 4)
    adv = ADV_ESTIMATORS["dr_grpo"](x).advantages
    want = T([0.5, -0.5, -0.5, 0.5, 0.25, 0.25, 0.25, -0.75])[:, None] * mask
    close(adv, want)
    assert not torch.allclose(ADV_ESTIMATORS["grpo"](x).advantages, want)  # grpo divides by the std
    close(ADV_ESTIMATORS["grpo_no_std"](x).advantages, want)


LOSS = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
AMASK = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # last row empty


def test_seq_mean_token_sum_norm_hand_values():
    mode = "seq-mean-token-sum-norm"
    close(aggregate_loss(LOSS, AMASK, mode, norm_tokens=4), (1 + 2 + 4) / (2 * 4))  # 2 rows with tokens, L = 4
    close(aggregate_loss(LOSS, AMASK, mode), (1 + 2 + 4) / (2 * 3))  # no L: the width, as verl
    assert loss_denominator(AMASK, mode, 4) == 8.0 and loss_denominator(AMASK, mode) == 6.0
    assert loss_denominator(AMASK, "seq-mean-token-sum", 4) == 2.0  # other modes ignore L
    close(aggregate_loss(LOSS, AMASK, mode, denom=16.0), 7 / 16)
    assert aggregate_loss(LOSS, torch.zeros(3, 3), mode, norm_tokens=4) == 0
    bad = LOSS.clone()
    bad[AMASK == 0] = float("nan")
    close(aggregate_loss(bad, AMASK, mode, norm_tokens=4), 7 / 8)


def test_seq_mean_token_sum_norm_micro_batches_of_other_widths_give_the_one_shot_gradient():
    """Micro-batches trimmed to their own width: with the constant L and the mini-batch's denominator
    the accumulated gradient is the one-shot gradient (the width, as a normaliser, would change)."""
    mode = "seq-mean-token-sum-norm"
    torch.manual_seed(3)
    x = torch.randn(4, 6, requires_grad=True)
    mask = T([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]]).float()
    loss_mat = lambda v: v.square() * 3  # noqa: E731
    aggregate_loss(loss_mat(x), mask, mode, norm_tokens=10).backward()
    g_one = x.grad.clone()
    x.grad = None
    denom = loss_denominator(mask, mode, 10)
    acc = 0.0
    for rows, width in ((slice(0, 1), 6), (slice(1, 3), 3), (slice(3, 4), 1)):
        part = aggregate_loss(loss_mat(x[rows, :width]), mask[rows, :width], mode, denom=denom)
        part.backward()
        acc += float(part.detach())
    close(x.grad, g_one)
    close(acc, float(aggregate_loss(loss_mat(x), mask, mode, norm_tokens=10).detach()))
    # Dr. GRPO's point: a row's tokens are weighted 1 / (rows * L), not 1 / (rows * |y_i|)
    close(g_one[1, :2], (6 * x[1, :2] / (4 * 10)).detach())


def test_config_loads_dr_grpo_and_checks_loss_norm_tokens():
    cfg = load_config(overrides={"algo.adv_estimator": "dr_grpo", "algo.loss_agg": "seq-mean-token-sum-norm",
                                 "algo.loss_norm_tokens": 512})
    assert cfg.algo.loss_norm_tokens == 512 and ADV_ESTIMATORS.traits("dr_grpo").group
    assert load_config().algo.loss_norm_tokens == 0  # 0 = rollout.max_total_tokens (the trainer resolves it)
    with pytest.raises(ValueError, match=r"algo\.loss_norm_tokens must be in \[0, "):
        load_config(overrides={"algo.loss_norm_tokens": -1})
    with pytest.raises(ValueError, match="compares samples of one prompt"):
        load_config(overrides={"algo.adv_estimator": "dr_grpo", "rollout.n_samples": 1})
