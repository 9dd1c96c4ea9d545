"""algo.skip_zero_advantage: leaving out rows whose advantages are all 0 changes neither the
gradient nor the weights (same normaliser, same optimiser steps), and is refused where the
entropy bonus or a KL loss term would give those rows a gradient."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.training.trainer import RLTrainer
from tests.precision_modes import FP32, both_cpu_modes
from tests.rollout_helpers import make_env_factory

NAMES = ["Karivo", "Bamena", "Tolusa", "Meriko"]
SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"]} for i, n in enumerate(NAMES)]
ZERO_ROWS = [0, 1, 2, 3, 6, 13]  # all of group 0 plus single rows elsewhere
pytestmark = both_cpu_modes  # exact to float rounding: fp32 pinned, whatever the CPU


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: a second thread only waits (and on a shared machine, spins)
    yield
    torch.set_num_threads(threads)


def _pair(tiny_model, tmp_path, **over):
    """(trainer without skipping, trainer with it, one batch whose ZERO_ROWS have zero advantages)."""
    base = {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4, "rollout.n_samples": 4,
            "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8, "train.ppo_epochs": 2,
            "train.minibatch_size": 8, "train.micro_batch_size": 3, "train.lr": 1e-2, "train.threads": 1,
            "train.weight_decay": 0.1, **FP32, **over}
    model, tok = tiny_model
    off = RLTrainer(load_config(None, base), copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    on = RLTrainer(load_config(None, {**base, "algo.skip_zero_advantage": True}), copy.deepcopy(model), tok,
                   make_env_factory("tag"), SAMPLES)
    batch = off.prepare(off.rollout())
    mask = batch["loss_mask"] > 0
    # non-zero, distinct advantages on every loss token, then rows of zeros: the skip has work to do
    adv = torch.linspace(-1.0, 1.0, mask.shape[0])[:, None].expand_as(mask) + 0.05
    adv = torch.where(mask, adv, torch.zeros_like(adv))
    adv[ZERO_ROWS] = 0.0
    batch["advantages"] = adv
    assert mask[ZERO_ROWS].any(-1).all() and mask.any(-1).all()  # the zeroed rows do have loss tokens
    return off, on, batch


def _assert_same_update(before, off, on):
    """The two runs moved the weights alike: |move_on - move_off| <= 1e-3 |move_off| (L2 over all
    weights). Not element-wise: AdamW divides each element by its own gradient scale, so where a
    gradient is near AdamW's eps the rounding of other micro-batch compositions moves that element
    by up to ~lr; the gradient tests are the element-wise check."""
    flat = lambda ps: torch.cat([p.detach().reshape(-1) for p in ps])  # noqa: E731
    w0, w_off, w_on = flat(before), flat(off.model.parameters()), flat(on.model.parameters())
    moved, differ = float((w_off - w0).norm()), float((w_on - w_off).norm())
    assert moved > 1e-2 and differ <= 1e-3 * moved, (moved, differ)


def _grads(trainer, batch, idx):
    trainer.optimizer.zero_grad(set_to_none=True)
    record, _ = trainer._backward_minibatch(batch, idx)
    return record, [p.grad.clone() for p in trainer.model.parameters() if p.requires_grad]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_gradient_equals_the_unskipped_one(tiny_model, tmp_path, agg):
    off, on, batch = _pair(tiny_model, tmp_path, **{"algo.loss_agg": agg})
    idx = torch.arange(batch["input_ids"].shape[0])
    rec_off, g_off = _grads(off, batch, idx)
    rec_on, g_on = _grads(on, batch, idx)
    assert rec_on["skipped_rows_fraction"] == pytest.approx(len(ZERO_ROWS) / len(idx))
    assert rec_on["policy_loss"] == pytest.approx(rec_off["policy_loss"], rel=1e-5, abs=1e-7)
    assert max(float(g.abs().max()) for g in g_off) > 1e-4  # a real gradient, not zeros on both sides
    for a, b in zip(g_off, g_on):  # a changed normaliser would scale every gradient
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)


def test_weights_after_the_update_equal_the_unskipped_run(tiny_model, tmp_path):
    # the whole update: PPO epochs over shuffled mini-batches of 8, micro-batches of 3
    off, on, batch = _pair(tiny_model, tmp_path)
    before = [p.detach().clone() for p in off.model.parameters()]
    off.update(batch)
    metrics = on.update(batch)
    assert 0.0 < metrics["skipped_rows_fraction"] < 1.0
    _assert_same_update(before, off, on)


@pytest.mark.parametrize("micro", [3, 0])  # 0: no micro-batching, the default (it crashed: range step 0)
def test_a_mini_batch_of_zero_rows_still_steps(tiny_model, tmp_path, micro):
    # after one real step AdamW has moments and weight decay: a step on zeros still moves the weights
    off, on, batch = _pair(tiny_model, tmp_path, **{"train.micro_batch_size": micro})
    every, zeros = torch.arange(batch["input_ids"].shape[0]), torch.tensor(ZERO_ROWS)
    before = [p.detach().clone() for p in off.model.parameters()]
    for t in (off, on):
        t._step_minibatch(batch, every, {})
    after_first = [p.detach().clone() for p in on.model.parameters()]
    stats_off, stats_on = {}, {}
    off._step_minibatch(batch, zeros, stats_off)
    on._step_minibatch(batch, zeros, stats_on)
    assert stats_on["skipped_rows_fraction"] == [1.0]
    assert any(not torch.equal(a, b) for a, b in zip(after_first, on.model.parameters()))  # it stepped
    _assert_same_update(before, off, on)


def test_kl_in_reward_is_exact_too(tiny_model, tmp_path):
    # the KL inside the advantages leaves no KL term in the loss: skipping stays exact
    off, on, batch = _pair(tiny_model, tmp_path, **{"algo.kl_coef": 0.05, "algo.kl_in_reward": True})
    idx = torch.arange(batch["input_ids"].shape[0])
    _, g_off = _grads(off, batch, idx)
    _, g_on = _grads(on, batch, idx)
    for a, b in zip(g_off, g_on):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("over", [{"algo.entropy_coef": 0.01}, {"algo.kl_coef": 0.05}])
def test_refused_where_zero_advantage_rows_have_gradients(over):
    with pytest.raises(ValueError, match="algo.skip_zero_advantage"):
        load_config(None, {"algo.skip_zero_advantage": True, **over})
