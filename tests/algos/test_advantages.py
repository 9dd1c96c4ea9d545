"""Advantage estimators vs hand-computed numbers and a plain-python loop reference."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_r1.algos import (
    ADV_ESTIMATORS,
    AdvantageInputs,
    AdvantageOutputs,
    compute_gae,
    compute_grpo,
    compute_reinforce_pp,
    compute_reinforce_pp_baseline,
    compute_rloo,
    get_adv_estimator,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
    needs_critic,
    register_adv_estimator,
)

T = torch.tensor


def close(a, b, tol=1e-5):
    torch.testing.assert_close(torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32),
                               atol=tol, rtol=tol)


# ---------------------------------------------------------------- python references
def ref_whiten(rows, masks):
    """Whiten over masked entries with statistics.stdev (Bessel); masked -> 0."""
    vals = [x for r, m in zip(rows, masks) for x, k in zip(r, m) if k]
    if len(vals) == 0:
        return [[0.0] * len(r) for r in rows]
    mu = statistics.mean(vals)
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return [[(x - mu) / math.sqrt(sd * sd + 1e-8) if k else 0.0 for x, k in zip(r, m)] for r, m in zip(rows, masks)]


def ref_gae_raw(rewards, values, mask, gamma, lam):
    """One row: loop over action tokens only, right to left."""
    act = [t for t, k in enumerate(mask) if k]
    adv = [0.0] * len(mask)
    nxt_v, nxt_a = 0.0, 0.0
    for t in reversed(act):
        delta = rewards[t] + gamma * nxt_v - values[t]
        adv[t] = delta + gamma * lam * nxt_a
        nxt_v, nxt_a = values[t], adv[t]
    return adv


def ref_group(scores, ids, valid):
    """Per row: list of the *other* valid scores of its group (None for invalid rows)."""
    out = []
    for i, (g, ok) in enumerate(zip(ids, valid)):
        out.append([scores[j] for j in range(len(ids)) if j != i and ids[j] == g and valid[j]] if ok else None)
    return out


# ---------------------------------------------------------------- masked helpers
def test_masked_helpers_hand_values():
    x = T([[1.0, 2.0, 100.0], [3.0, float("nan"), 5.0]])
    m = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    close(masked_sum(x, m), 6.0)
    close(masked_mean(x, m), 2.0)
    close(masked_mean(x, m, dim=-1), [1.5, 3.0])
    close(masked_var(x, m), 1.0)  # values 1,2,3: unbiased var 1
    close(masked_var(x, m, unbiased=False), 2.0 / 3.0)
    w = masked_whiten(x, m)
    close(w, [[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    close(masked_whiten(x, m, shift_mean=False), [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]])


def test_masked_helpers_empty_mask_no_nan():
    x = T([[1.0, 2.0]])
    m = torch.zeros(1, 2)
    for v in (masked_sum(x, m), masked_mean(x, m), masked_var(x, m), masked_whiten(x, m)):
        assert torch.isfinite(v).all() and (v == 0).all()
    one = T([[0.0, 1.0]])  # a single entry: var 0, whitened 0
    assert masked_var(x, one) == 0 and (masked_whiten(x, one) == 0).all()


# ---------------------------------------------------------------- GAE
# Multi-turn row: action, action, observation, observation, action, padding.
MT_MASK = T([[1.0, 1.0, 0.0, 0.0, 1.0, 0.0]])
MT_VAL = T([[0.5, 0.4, 9.0, 9.0, 0.2, 9.0]])
MT_REW = T([[0.0, 0.0, 5.0, 0.0, 1.0, 0.0]])  # the 5.0 sits on an observation token: ignored


def test_gae_hand_values_bootstrap_across_hole():
    g, lam = 0.9, 0.8
    # t=4: delta = 1 + 0 - 0.2 = 0.8                   A4 = 0.8
    # t=1: delta = 0 + 0.9*0.2 - 0.4 = -0.22 (V(t=4) !) A1 = -0.22 + 0.72*0.8 = 0.356
    # t=0: delta = 0 + 0.9*0.4 - 0.5 = -0.14           A0 = -0.14 + 0.72*0.356 = 0.11632
    raw = [0.11632, 0.356, 0.0, 0.0, 0.8, 0.0]
    adv, ret = compute_gae(MT_REW, MT_VAL, MT_MASK, g, lam)
    close(ret, [[0.61632, 0.756, 0.0, 0.0, 1.0, 0.0]])
    mu = (0.11632 + 0.356 + 0.8) / 3
    sd = math.sqrt(sum((a - mu) ** 2 for a in (0.11632, 0.356, 0.8)) / 2)
    close(adv, [[(a - mu) / sd if k else 0.0 for a, k in zip(raw, MT_MASK[0].tolist())]])
    assert (adv[MT_MASK == 0] == 0).all() and (ret[MT_MASK == 0] == 0).all()


def test_gae_ignores_masked_values_and_rewards():
    v2, r2 = MT_VAL.clone(), MT_REW.clone()
    v2[MT_MASK == 0] = -123.0
    r2[MT_MASK == 0] = 77.0
    a1, R1 = compute_gae(MT_REW, MT_VAL, MT_MASK, 0.9, 0.8)
    a2, R2 = compute_gae(r2, v2, MT_MASK, 0.9, 0.8)
    close(a1, a2)
    close(R1, R2)


def test_gae_lambda1_gamma1_returns_are_reward_to_go():
    mask = T([[1.0, 0.0, 1.0, 1.0]])
    rew = T([[0.0, 0.0, 0.0, 2.0]])
    vals = T([[0.3, 0.0, 0.1, 0.7]])
    _, ret = compute_gae(rew, vals, mask, 1.0, 1.0)
    close(ret, [[2.0, 0.0, 2.0, 2.0]])


def test_gae_zero_action_tokens_no_nan():
    adv, ret = compute_gae(torch.ones(2, 3), torch.ones(2, 3), torch.zeros(2, 3), 1.0, 0.95)
    assert torch.isfinite(adv).all() and (adv == 0).all() and (ret == 0).all()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_gae_matches_python_loop(data):
    B = data.draw(st.integers(1, 4))
    Tn = data.draw(st.integers(1, 7))
    fl = st.floats(-3, 3, allow_nan=False, width=32)
    rew = [[data.draw(fl) for _ in range(Tn)] for _ in range(B)]
    val = [[data.draw(fl) for _ in range(Tn)] for _ in range(B)]
    msk = [[data.draw(st.sampled_from([0.0, 1.0])) for _ in range(Tn)] for _ in range(B)]
    g = data.draw(st.floats(0.5, 1.0))
    lam = data.draw(st.floats(0.0, 1.0))
    raw = [ref_gae_raw(r, v, m, g, lam) for r, v, m in zip(rew, val, msk)]
    adv, ret = compute_gae(T(rew), T(val), T(msk), g, lam)
    close(ret, [[a + v if k else 0.0 for a, v, k in zip(ra, rv, rm)] for ra, rv, rm in zip(raw, val, msk)], 1e-4)
    n = sum(map(sum, msk))
    if n >= 2 and statistics.stdev([x for ra, rm in zip(raw, msk) for x, k in zip(ra, rm) if k]) > 1e-2:
        close(adv, ref_whiten(raw, msk), 1e-3)
    assert torch.isfinite(adv).all() and (adv[T(msk) == 0] == 0).all()


# ---------------------------------------------------------------- GRPO / RLOO
SCORES = T([1.0, 0.0, 1.0, 0.5, 2.0, 3.0, 3.0])
IDS = ["a", "a", "a", "a", "b", "c", "c"]  # group a: 4, b: single, c: all equal
MASK7 = T([[1.0, 1.0, 0.0]] * 7)


def test_grpo_hand_values():
    sd = math.sqrt((0.375**2 + 0.625**2 + 0.375**2 + 0.125**2) / 3)  # mean 0.625
    exp = [0.375 / sd, -0.625 / sd, 0.375 / sd, -0.125 / sd, 0.0, 0.0, 0.0]
    adv = compute_grpo(SCORES, IDS, MASK7)
    close(adv[:, 0], exp, 1e-4)
    close(adv[:, 1], exp, 1e-4)
    assert (adv[:, 2] == 0).all()
    # Dr. GRPO: no std normalisation
    close(compute_grpo(SCORES, IDS, MASK7, normalize_std=False)[:, 0], [0.375, -0.625, 0.375, -0.125, 0, 0, 0])


def test_grpo_matches_torch_std_and_eps():
    s = T([0.0, 1.0])
    adv = compute_grpo(s, [7, 7], torch.ones(2, 1), eps=0.5)
    sd = s.std().item()  # Bessel: sqrt(0.5)
    close(adv[:, 0], [-0.5 / (sd + 0.5), 0.5 / (sd + 0.5)])


def test_rloo_hand_values():
    exp = [1 - 1.5 / 3, 0 - 2.5 / 3, 1 - 1.5 / 3, 0.5 - 2.0 / 3, 0.0, 0.0, 0.0]
    adv = compute_rloo(SCORES, IDS, MASK7)
    close(adv[:, 0], exp)
    assert (adv[:, 2] == 0).all()


@pytest.mark.parametrize("fn", [compute_grpo, compute_rloo, compute_reinforce_pp_baseline])
def test_group_estimators_singletons_and_ties_are_zero(fn):
    mask = torch.ones(4, 3)
    assert (fn(T([5.0, 5.0, 5.0, -1.0]), ["x", "x", "x", "y"], mask) == 0).all()
    # a tie on a value whose float32 mean would round off (found by hypothesis): still exactly 0
    assert (fn(T([2.8582615852355957] * 3 + [0.1]), ["x", "x", "x", "y"], mask) == 0).all()


@pytest.mark.parametrize(
    "fn",
    [compute_grpo, compute_rloo, compute_reinforce_pp_baseline,
     lambda s, g, m: compute_grpo(s, g, m, normalize_std=False)],
)
def test_group_estimators_zero_action_tokens_no_nan(fn):
    adv = fn(T([1.0, 0.0]), ["a", "a"], torch.zeros(2, 3))
    assert torch.isfinite(adv).all() and (adv == 0).all()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(-5, 5, width=32)), min_size=1, max_size=10))
@example([("a", 2.8582615852355957)] * 3)
def test_grpo_rloo_group_sums_and_loop_reference(rows):
    ids = [g for g, _ in rows]
    scores = [s for _, s in rows]
    mask = torch.ones(len(rows), 2)
    grpo = compute_grpo(T(scores), ids, mask)[:, 0].tolist()
    rloo = compute_rloo(T(scores), ids, mask)[:, 0].tolist()
    others = ref_group(scores, ids, [True] * len(rows))
    for i, o in enumerate(others):
        exp_rloo = 0.0 if not o else scores[i] - sum(o) / len(o)
        assert rloo[i] == pytest.approx(exp_rloo, abs=1e-4)
    for g in set(ids):
        idx = [i for i, x in enumerate(ids) if x == g]
        assert abs(sum(grpo[i] for i in idx)) < 1e-3 * max(1, len(idx))
        assert abs(sum(rloo[i] for i in idx)) < 1e-3 * max(1, len(idx))


# ---------------------------------------------------------------- REINFORCE++
def test_reinforce_pp_hand_values():
    mask = T([[1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    rew = T([[0.0, 0.0, 9.0, 1.0], [0.0, 2.0, 0.0, 0.0]])  # 9.0 on an observation token: ignored
    # row 0: G3 = 1, G1 = 0 + 0.5*1 = 0.5 (skips the hole), G0 = 0.25; row 1: G1 = 2, G0 = 1
    adv, ret = compute_reinforce_pp(rew, mask, 0.5)
    close(ret, [[0.25, 0.5, 0.0, 1.0], [1.0, 2.0, 0.0, 0.0]])
    vals = [0.25, 0.5, 1.0, 1.0, 2.0]
    mu, sd = statistics.mean(vals), statistics.stdev(vals)
    close(adv, [[(0.25 - mu) / sd, (0.5 - mu) / sd, 0.0, (1 - mu) / sd], [(1 - mu) / sd, (2 - mu) / sd, 0.0, 0.0]])


def test_reinforce_pp_zero_action_tokens_no_nan():
    adv, ret = compute_reinforce_pp(torch.ones(2, 3), torch.zeros(2, 3), 1.0)
    assert torch.isfinite(adv).all() and (adv == 0).all() and (ret == 0).all()


def test_reinforce_pp_baseline_hand_values():
    scores = T([1.0, 0.0, 3.0])
    mask = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    # group a mean 0.5 -> +0.5 (2 tokens), -0.5 (1 token); group b singleton -> 0 (3 tokens)
    tok = [0.5, 0.5, -0.5, 0.0, 0.0, 0.0]
    mu, sd = statistics.mean(tok), statistics.stdev(tok)
    adv = compute_reinforce_pp_baseline(scores, ["a", "a", "b"], mask)
    close(adv, [[(0.5 - mu) / sd, (0.5 - mu) / sd, 0.0], [(-0.5 - mu) / sd, 0.0, 0.0],
                [(0 - mu) / sd] * 3])


# ---------------------------------------------------------------- padding rows
def _all_estimators(rew, val, mask, scores, ids):
    return {
        "gae": compute_gae(rew, val, mask, 0.9, 0.95),
        "reinforce_pp": compute_reinforce_pp(rew, mask, 0.9),
        "grpo": compute_grpo(scores, ids, mask),
        "grpo_no_std": compute_grpo(scores, ids, mask, normalize_std=False),
        "rloo": compute_rloo(scores, ids, mask),
        "rpp_baseline": compute_reinforce_pp_baseline(scores, ids, mask),
    }


def test_padding_row_does_not_change_other_rows():
    torch.manual_seed(0)
    mask = T([[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    rew, val = torch.randn(4, 4), torch.randn(4, 4)
    scores, ids = T([1.0, 0.0, 0.3, 0.7]), ["p", "p", "q", "q"]
    base = _all_estimators(rew, val, mask, scores, ids)
    # padding row with garbage data, sharing group "p"
    mask_p = torch.cat([mask, torch.zeros(1, 4)])
    padded = _all_estimators(torch.cat([rew, torch.full((1, 4), 50.0)]), torch.cat([val, torch.full((1, 4), -9.0)]),
                             mask_p, torch.cat([scores, T([100.0])]), ids + ["p"])
    for k, v in base.items():
        for a, b in zip(v if isinstance(v, tuple) else (v,), padded[k] if isinstance(v, tuple) else (padded[k],)):
            torch.testing.assert_close(b[:4], a, msg=k)
            assert (b[4] == 0).all(), k


# ---------------------------------------------------------------- registry
def _inputs(values=None):
    mask = T([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    rew = T([[0.0, 0.0, 1.0], [0.0, 0.5, 0.0]])
    return AdvantageInputs(rew, T([1.0, 0.5]), mask, ["a", "a"], values, gamma=0.9, lam=0.95)


def test_registry_dispatch_matches_functions():
    assert set(ADV_ESTIMATORS) >= {"gae", "grpo", "grpo_no_std", "rloo", "reinforce_pp", "reinforce_pp_baseline"}
    x = _inputs(values=T([[0.1, 0.0, 0.2], [0.3, 0.4, 0.0]]))
    out = get_adv_estimator("gae")(x)
    a, r = compute_gae(x.token_rewards, x.values, x.action_mask, 0.9, 0.95)
    close(out.advantages, a)
    close(out.returns, r)
    close(get_adv_estimator("grpo")(x).advantages, compute_grpo(x.scores, x.group_ids, x.action_mask))
    close(get_adv_estimator("grpo_no_std")(x).advantages,
          compute_grpo(x.scores, x.group_ids, x.action_mask, normalize_std=False))
    close(get_adv_estimator("rloo")(x).advantages, compute_rloo(x.scores, x.group_ids, x.action_mask))
    out = get_adv_estimator("reinforce_pp")(x)
    close(out.returns, compute_reinforce_pp(x.token_rewards, x.action_mask, 0.9)[1])
    assert get_adv_estimator("reinforce_pp_baseline")(x).returns is None
    for name in ADV_ESTIMATORS:
        assert needs_critic(name) == (name == "gae")


def test_registry_errors():
    with pytest.raises(ValueError, match="needs values"):
        get_adv_estimator("gae")(_inputs(values=None))
    with pytest.raises(ValueError, match="grpo"):  # the message lists the known names
        get_adv_estimator("nope")
    with pytest.raises(ValueError):
        needs_critic("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_adv_estimator("grpo")(lambda x: AdvantageOutputs(x.action_mask))


def test_register_custom_estimator():
    name = "_test_zero"
    try:
        @register_adv_estimator(name)
        def _zero(x: AdvantageInputs) -> AdvantageOutputs:
            return AdvantageOutputs(torch.zeros_like(x.action_mask))

        assert get_adv_estimator(name)(_inputs()).advantages.sum() == 0
        assert needs_critic(name) is False
    finally:
        ADV_ESTIMATORS.unregister(name)
