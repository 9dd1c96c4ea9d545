"""GSPO and CISPO policy losses (algos/losses.py) vs hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from agent_r1.algos import (
    POLICY_LOSSES,
    cispo_policy_loss,
    gspo_policy_loss,
    loss_denominator,
    ppo_policy_loss,
    vanilla_policy_loss,
)
from agent_r1.config import load_config

T = torch.tensor
e = math.exp


def close(a, b, tol=1e-5):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32),
                               atol=tol, rtol=tol)


# ---------------------------------------------------------------- GSPO
# 2 x 3: row 0 has three tokens, row 1 two (its last is padding). Sequence log-ratios are the
# masked means: row 0 (0.3 - 0.1 + 0.1) / 3 = 0.1, row 1 (-0.4 + 0.0) / 2 = -0.2.
LOG_RATIO = T([[0.3, -0.1, 0.1], [-0.4, 0.0, 0.0]])
OLD = T([[-1.0, -2.0, -0.5], [-0.7, -1.2, -3.0]])
MASK = T([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
ADV = T([[1.0, -1.0, 1.0], [-1.0, 1.0, 0.0]])
S0, S1 = e(0.1), e(-0.2)  # 1.105, 0.819: outside [0.9, 1.05] above and below


def _gspo(**kw):
    logp = (OLD + LOG_RATIO).requires_grad_(True)
    loss, m = gspo_policy_loss(logp, OLD, ADV, MASK, **{"clip_low": 0.1, "clip_high": 0.05, **kw})
    loss.backward()
    return loss, logp.grad, m


def test_gspo_hand_values_clip_on_both_sides():
    loss, grad, m = _gspo()
    # per token max(-A s, -A clip(s)): row 0 s=1.105 > 1.05: A>0 tokens clipped to -1.05, the A<0 token keeps
    # 1.105 (pessimistic); row 1 s=0.819 < 0.9: the A<0 token clipped to 0.9, the A>0 token keeps -0.819
    row0 = (-1.05 + S0 - 1.05) / 3
    row1 = (0.9 - S1) / 2
    close(loss, (row0 + row1) / 2)  # seq-mean-token-mean, the default
    # gradient only through the unclipped tokens: d(-A s_i,t)/dlogp_t = -A s_i, times 1/|y_i| and 1/G
    close(grad, [[0.0, S0 / 3 / 2, 0.0], [0.0, -S1 / 2 / 2, 0.0]])
    close(m["clipfrac"], 3 / 5)
    close(m["clipfrac_lower"], 0.0)
    close(m["ratio_mean"], (S0 + S1) / 2)  # per sequence
    close(m["approx_kl"], -(0.3 - 0.1 + 0.1 - 0.4 + 0.0) / 5)  # per token, as PPO's


def test_gspo_wide_clip_is_unclipped_and_agg_is_honoured():
    loss, grad, m = _gspo(clip_low=0.5, clip_high=0.5)
    assert m["clipfrac"] == 0
    close(grad, [[-S0 / 6, S0 / 6, -S0 / 6], [S1 / 4, -S1 / 4, 0.0]])
    tok = gspo_policy_loss(OLD + LOG_RATIO, OLD, ADV, MASK, 0.5, 0.5, agg="token-mean")[0]
    close(tok, (-S0 + S0 - S0 + S1 - S1) / 5)


def test_gspo_dual_clip_caps_negative_advantages_on_the_sequence_ratio():
    logp, old, mask = T([[1.0, 1.0]], requires_grad=True), T([[0.0, 0.0]]), T([[1.0, 1.0]])
    loss, m = gspo_policy_loss(logp, old, T([[-1.0, -1.0]]), mask, 0.2, 0.2, dual_clip=2.0)
    loss.backward()
    close(loss, 2.0)  # -A * s = e > c = 2: capped at -A * c
    assert m["clipfrac_lower"] == 1 and (logp.grad == 0).all()
    close(gspo_policy_loss(logp, old, T([[-1.0, -1.0]]), mask, 0.2, 0.2)[0], e(1.0))


def test_gspo_gradient_is_the_sequence_level_gspo_gradient():
    """With one advantage per row, GSPO-token's gradient equals GSPO's: -A_i grad clip-aware s_i."""
    torch.manual_seed(0)
    B, Tn = 6, 5
    old = -torch.rand(B, Tn) * 2
    logp = (old + 0.05 * torch.randn(B, Tn)).requires_grad_(True)
    mask = (torch.rand(B, Tn) > 0.3).float()
    mask[:, 0] = 1.0
    a = torch.randn(B)
    loss, m = gspo_policy_loss(logp, old, a[:, None].expand(B, Tn), mask, 0.01, 0.01)
    loss.backward()
    assert 0 < m["clipfrac"] < 1  # some rows clipped, some not

    ref = logp.detach().clone().requires_grad_(True)
    s = torch.exp(((ref - old) * mask).sum(-1) / mask.sum(-1))
    seq = torch.maximum(-a * s, -a * s.clamp(0.99, 1.01)).mean()
    seq.backward()
    close(loss, seq)
    close(logp.grad, ref.grad)


def test_gspo_on_policy_is_sequence_mean_reinforce():
    torch.manual_seed(1)
    logits = torch.randn(3, 4, 6, requires_grad=True)
    tokens = torch.randint(0, 6, (3, 4))
    mask = T([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    adv = torch.randn(3, 4)

    def grad(fn):
        logits.grad = None
        logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
        fn(logp).backward()
        return logits.grad.clone()

    g = grad(lambda lp: gspo_policy_loss(lp, lp.detach(), adv, mask)[0])
    # -(1/G) sum_i (1/|y_i|) sum_t A_t logp_t
    want = grad(lambda lp: -(((adv * lp * mask).sum(-1) / mask.sum(-1)).mean()))
    close(g, want)
    assert g.abs().sum() > 0


# ---------------------------------------------------------------- CISPO
def test_cispo_hand_values_weight_capped_and_detached():
    ratio = T([[1.5, 0.5, 6.0]])
    logp = T([[-0.5, -1.0, -0.2]], requires_grad=True)
    old = (logp.detach() - ratio.log()).requires_grad_(True)
    adv = T([[1.0, -1.0, 2.0]])
    loss, m = cispo_policy_loss(logp, old, adv, torch.ones(1, 3), clip_low=0.2, clip_high=4.0)
    loss.backward()
    w = [1.5, 0.5, 5.0]  # min(r, 1 + 4): no lower bound, so 0.5 stays 0.5
    close(loss, (-1.5 * 1 * -0.5 - 0.5 * -1 * -1.0 - 5.0 * 2 * -0.2) / 3)  # -w A logp, token mean
    # -w A / n: the capped token (r = 6) keeps a gradient, and so does r = 0.5 with A < 0, which PPO
    # clips; the detached weight adds no d w / d logp term (it would add -A r logp / n)
    close(logp.grad, [[-w[0] * 1 / 3, -w[1] * -1 / 3, -w[2] * 2 / 3]])
    assert (logp.grad != 0).all() and old.grad is None
    close(m["clipfrac"], 1 / 3)
    close(m["ratio_mean"], (1.5 + 0.5 + 6.0) / 3)
    close(m["approx_kl"], -(math.log(1.5) + math.log(0.5) + math.log(6.0)) / 3)
    # PPO on the same tokens: the r = 6, A > 0 token and the r = 0.5, A < 0 token get no gradient
    lp2 = logp.detach().clone().requires_grad_(True)
    ppo_policy_loss(lp2, old.detach(), adv, torch.ones(1, 3))[0].backward()
    assert lp2.grad[0, 1] == 0 and lp2.grad[0, 2] == 0


def test_cispo_on_policy_is_reinforce():
    logp = T([[-0.5, -1.0, -2.0]], requires_grad=True)
    adv, mask = T([[2.0, -1.0, 5.0]]), T([[1.0, 1.0, 0.0]])
    cispo_policy_loss(logp, logp.detach(), adv, mask)[0].backward()
    close(logp.grad, [[-1.0, 0.5, 0.0]])  # -A / n_tokens, as vanilla
    ref = logp.detach().clone().requires_grad_(True)
    vanilla_policy_loss(ref, ref.detach(), adv, mask)[0].backward()
    close(logp.grad, ref.grad)


# ---------------------------------------------------------------- both: masking, registry, config
@pytest.mark.parametrize("name", ["gspo", "cispo"])
def test_masked_tokens_get_exactly_zero_gradient(name):
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7, requires_grad=True)
    tokens = torch.randint(0, 7, (2, 5))
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)
    old = log_probs.detach() + 0.05 * torch.randn(2, 5)
    old[0, 2], old[1, 3] = float("nan"), float("inf")
    adv = torch.randn(2, 5)
    adv[0, 3] = float("nan")
    mask = T([[1.0, 1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    loss, metrics = POLICY_LOSSES[name](log_probs, old, adv, mask, clip_low=0.2, clip_high=0.2)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(v) for v in metrics.values())
    assert set(metrics) == {"clipfrac", "clipfrac_lower", "approx_kl", "ratio_mean"}
    assert (logits.grad[mask == 0] == 0).all() and torch.isfinite(logits.grad).all()
    assert (logits.grad[mask == 1].abs().sum(-1) > 0).all()


@pytest.mark.parametrize("name", ["gspo", "cispo"])
def test_micro_batches_sum_to_the_one_shot_loss_and_gradient(name):
    torch.manual_seed(2)
    old = -torch.rand(5, 6) * 2
    logp = (old + 0.1 * torch.randn(5, 6)).requires_grad_(True)
    mask = (torch.rand(5, 6) > 0.3).float()
    adv = torch.randn(5, 1).expand(5, 6)
    fn = POLICY_LOSSES[name]
    for agg in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        denom = loss_denominator(mask, agg, 8)
        logp.grad = None
        one = fn(logp, old, adv, mask, 0.05, 0.05, agg=agg, denom=denom)[0]
        one.backward()
        g_one = logp.grad.clone()
        logp.grad = None
        parts = sum(fn(logp[r], old[r], adv[r], mask[r], 0.05, 0.05, agg=agg, denom=denom)[0]
                    for r in (slice(0, 2), slice(2, 3), slice(3, 5)))
        parts.backward()
        close(parts, one)
        close(logp.grad, g_one)


def test_config_loads_the_new_names():
    cfg = load_config(overrides={"algo.policy_loss": "gspo", "algo.clip_low": 3e-4, "algo.clip_high": 4e-4,
                                 "algo.loss_agg": "seq-mean-token-mean"})
    assert POLICY_LOSSES[cfg.algo.policy_loss] is gspo_policy_loss
    assert POLICY_LOSSES[load_config(overrides={"algo.policy_loss": "cispo"}).algo.policy_loss] is cispo_policy_loss
