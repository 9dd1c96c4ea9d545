"""Losses, aggregation, KL estimators and entropy vs hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_r1.algos import (
    AGG_MODES,
    KL_PENALTIES,
    POLICY_LOSSES,
    aggregate_loss,
    entropy_bonus,
    entropy_from_logits,
    get_kl_penalty,
    get_policy_loss,
    kl_penalty,
    ppo_policy_loss,
    vanilla_policy_loss,
    value_loss,
)

T = torch.tensor


def close(a, b, tol=1e-5):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32),
                               atol=tol, rtol=tol)


# ---------------------------------------------------------------- aggregation
LOSS = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
MASK = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # last row empty


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("token-mean", (1 + 2 + 4) / 3),  # 3 action tokens
        ("seq-mean-token-mean", (1.5 + 4.0) / 2),  # empty row excluded
        ("seq-mean-token-sum", (3.0 + 4.0) / 2),
    ],
)
def test_aggregate_hand_values(mode, expected):
    close(aggregate_loss(LOSS, MASK, mode), expected)


def test_aggregate_empty_mask_and_nan_at_masked_positions():
    for mode in AGG_MODES:
        out = aggregate_loss(LOSS, torch.zeros(3, 3), mode)
        assert torch.isfinite(out) and out == 0
    bad = LOSS.clone()
    bad[MASK == 0] = float("nan")
    for mode in AGG_MODES:
        close(aggregate_loss(bad, MASK, mode), aggregate_loss(LOSS, MASK, mode))


def test_aggregate_unknown_mode():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate_loss(LOSS, MASK, "seq-sum")


# ---------------------------------------------------------------- PPO policy loss
def _one(ratio: float, adv: float, **kw):
    """PPO loss and d loss / d logp for a single token with the given ratio."""
    logp = T([[math.log(ratio)]], requires_grad=True)
    loss, metrics = ppo_policy_loss(logp, T([[0.0]]), T([[adv]]), T([[1.0]]), **kw)
    loss.backward()
    return loss.item(), logp.grad.item(), metrics


@pytest.mark.parametrize(
    "ratio,adv,loss,clipped",
    [
        (1.5, 1.0, -1.2, True),  # A>0, ratio above 1+eps: clipped, no gradient
        (1.5, -1.0, 1.5, False),  # A<0, ratio above: pessimistic unclipped term
        (0.5, 1.0, -0.5, False),  # A>0, ratio below: unclipped
        (0.5, -1.0, 0.8, True),  # A<0, ratio below 1-eps: clipped
        (1.1, 2.0, -2.2, False),  # inside the trust region
    ],
)
def test_ppo_clipping_cases(ratio, adv, loss, clipped):
    value, grad, m = _one(ratio, adv)
    assert value == pytest.approx(loss, abs=1e-5)
    assert m["clipfrac"].item() == (1.0 if clipped else 0.0)
    if clipped:
        assert grad == 0.0
    else:
        assert grad == pytest.approx(-adv * ratio, rel=1e-5)  # d(-A r)/dlogp = -A r


def test_ppo_asymmetric_clip_higher():
    assert _one(1.25, 1.0)[0] == pytest.approx(-1.2, abs=1e-6)
    assert _one(1.25, 1.0, clip_high=0.28)[0] == pytest.approx(-1.25, abs=1e-6)
    assert _one(0.7, -1.0, clip_low=0.2)[0] == pytest.approx(0.8, abs=1e-6)
    assert _one(0.7, -1.0, clip_low=0.4)[0] == pytest.approx(0.7, abs=1e-6)


def test_ppo_dual_clip():
    # A = -1, ratio = 5: standard PPO loss = max(5, 1.2) = 5, dual clip c=3 caps at -A*c = 3
    assert _one(5.0, -1.0)[0] == pytest.approx(5.0, rel=1e-5)
    value, grad, m = _one(5.0, -1.0, dual_clip=3.0)
    assert value == pytest.approx(3.0, rel=1e-6) and grad == 0.0 and m["clipfrac_lower"].item() == 1.0
    # below the cap: unchanged; positive advantages never dual-clipped
    assert _one(2.0, -1.0, dual_clip=3.0)[0] == pytest.approx(2.0, rel=1e-5)
    assert _one(5.0, 1.0, dual_clip=3.0)[0] == pytest.approx(-1.2, rel=1e-5)
    with pytest.raises(ValueError):
        _one(1.0, 1.0, dual_clip=0.5)


def test_ppo_metrics_and_agg_modes():
    logp = T([[math.log(1.5), math.log(1.0), 0.0], [math.log(0.5), 0.0, 0.0]])
    old = torch.zeros(2, 3)
    adv = T([[1.0, 1.0, 1.0], [-1.0, 0.0, 0.0]])
    mask = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # per-token losses: -1.2 (clipped), -1.0, -, 0.8 (clipped)
    loss, m = ppo_policy_loss(logp, old, adv, mask)
    close(loss, (-1.2 - 1.0 + 0.8) / 3)
    close(m["clipfrac"], 2 / 3)
    close(m["approx_kl"], -(math.log(1.5) + math.log(0.5)) / 3)
    close(ppo_policy_loss(logp, old, adv, mask, agg="seq-mean-token-mean")[0], (-1.1 + 0.8) / 2)
    close(ppo_policy_loss(logp, old, adv, mask, agg="seq-mean-token-sum")[0], (-2.2 + 0.8) / 2)


@pytest.mark.parametrize("loss_fn", [ppo_policy_loss, vanilla_policy_loss])
def test_masked_tokens_get_exactly_zero_gradient(loss_fn):
    torch.manual_seed(0)
    B, Tn, V = 2, 5, 7
    logits = torch.randn(B, Tn, V, requires_grad=True)
    tokens = torch.randint(0, V, (B, Tn))
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)
    old = log_probs.detach() + 0.05 * torch.randn(B, Tn)
    old[0, 2] = float("nan")  # garbage at masked positions must not leak
    old[1, 3] = float("inf")
    adv = torch.randn(B, Tn)
    adv[0, 3] = float("nan")
    mask = T([[1.0, 1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    loss, _ = loss_fn(log_probs, old, adv, mask)
    loss.backward()
    g = logits.grad
    assert torch.isfinite(g).all()
    assert (g[mask == 0] == 0).all()
    assert (g[mask == 1].abs().sum(-1) > 0).all()


def test_vanilla_is_reinforce_on_policy():
    logp = T([[-0.5, -1.0, -2.0]], requires_grad=True)
    adv = T([[2.0, -1.0, 5.0]])
    mask = T([[1.0, 1.0, 0.0]])
    loss, m = vanilla_policy_loss(logp, logp.detach(), adv, mask)
    loss.backward()
    close(loss, -(2.0 - 1.0) / 2)  # ratio = 1
    close(logp.grad, [[-1.0, 0.5, 0.0]])  # -A / n_tokens
    # far off-policy: no clipping
    loss2, _ = vanilla_policy_loss(T([[math.log(3.0)]]), T([[0.0]]), T([[1.0]]), T([[1.0]]))
    close(loss2, -3.0)


def test_policy_loss_registry():
    assert POLICY_LOSSES["ppo"] is ppo_policy_loss and get_policy_loss("vanilla") is vanilla_policy_loss
    with pytest.raises(ValueError, match="ppo"):
        get_policy_loss("trpo")


# ---------------------------------------------------------------- value loss
def test_value_loss_clipping_hand_values():
    # token 0: v=1.5, old=1, R=2 -> v_clip=1.2: max(0.25, 0.64) = 0.64 (clipped term wins)
    # token 1: v=1.5, old=1, R=1 -> max(0.25, 0.04) = 0.25
    # token 2: masked
    v = T([[1.5, 1.5, 100.0]], requires_grad=True)
    old = T([[1.0, 1.0, 0.0]])
    ret = T([[2.0, 1.0, 0.0]])
    mask = T([[1.0, 1.0, 0.0]])
    loss, m = value_loss(v, old, ret, mask, clip=0.2)
    close(loss, 0.5 * (0.64 + 0.25) / 2)
    close(m["vf_clipfrac"], 0.5)
    loss.backward()
    close(v.grad, [[0.0, 0.5 * 2 * 0.5 / 2, 0.0]])  # clipped token: no grad; d 0.5(v-R)^2 / 2 tokens
    # garbage at the masked position neither leaks into the loss nor the gradient
    v2 = T([[1.5, 1.5, float("nan")]], requires_grad=True)
    loss2, _ = value_loss(v2, T([[1.0, 1.0, float("inf")]]), T([[2.0, 1.0, float("nan")]]), mask, clip=0.2)
    loss2.backward()
    close(loss2, loss)
    close(v2.grad, v.grad)
    unclipped, _ = value_loss(v.detach(), old, ret, mask, clip=None)
    close(unclipped, 0.5 * (0.25 + 0.25) / 2)
    close(value_loss(v.detach(), old, ret, mask, agg="seq-mean-token-sum")[0], 0.5 * (0.64 + 0.25))


# ---------------------------------------------------------------- KL
def test_kl_hand_values():
    logp = T([[-1.0, -2.0, -1.5]])
    ref = T([[-2.0, -1.0, -1.5]])
    close(kl_penalty(logp, ref, "k1"), [[1.0, -1.0, 0.0]])
    close(kl_penalty(logp, ref, "abs"), [[1.0, 1.0, 0.0]])
    close(kl_penalty(logp, ref, "k2"), [[0.5, 0.5, 0.0]])
    # k3: x = ref - logp; e^x - x - 1
    close(kl_penalty(logp, ref, "k3"), [[math.exp(-1) + 1 - 1, math.exp(1) - 1 - 1, 0.0]])
    for alias, kind in (("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3")):
        close(kl_penalty(logp, ref, alias), kl_penalty(logp, ref, kind))


def test_kl_k3_clamped_and_finite():
    out = kl_penalty(T([[-100.0, 0.0]]), T([[0.0, -100.0]]), "k3")
    assert torch.isfinite(out).all() and (out <= 10.0).all()
    close(out[0, 0], 10.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-15, 0, width=32), st.floats(-15, 0, width=32)), min_size=1, max_size=16))
@example([(-5.960464477539063e-08, 0.0)])  # exp(x) - x - 1 rounds below 0 in float32
def test_kl_k3_nonnegative_and_k2_ge_0(pairs):
    logp = T([[a for a, _ in pairs]])
    ref = T([[b for _, b in pairs]])
    assert (kl_penalty(logp, ref, "k3") >= 0).all()
    assert (kl_penalty(logp, ref, "k2") >= 0).all()


def test_kl_registry():
    assert set(KL_PENALTIES) >= {"k1", "k2", "k3", "abs"}
    with pytest.raises(ValueError, match="k3"):
        get_kl_penalty("k4")


# ---------------------------------------------------------------- entropy
def test_entropy_hand_values():
    logits = torch.stack([torch.zeros(4), T([0.0, float("-inf"), float("-inf"), float("-inf")])])[None]
    ent = entropy_from_logits(logits)
    assert ent.shape == (1, 2)
    close(ent, [[math.log(4), 0.0]])
    p = T([0.7, 0.2, 0.1])
    close(entropy_from_logits(p.log()[None, None]), [[-(p * p.log()).sum().item()]])


def test_entropy_bonus_masked_and_grad_finite():
    logits = torch.zeros(1, 3, 4)
    logits[0, 1, 1:] = float("-inf")
    logits.requires_grad_(True)
    mask = T([[1.0, 1.0, 0.0]])
    bonus = entropy_bonus(logits, mask)
    close(bonus, (math.log(4) + 0.0) / 2)
    bonus.backward()
    assert torch.isfinite(logits.grad).all() and (logits.grad[0, 2] == 0).all()
