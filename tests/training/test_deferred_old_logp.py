"""learn() takes the old log-probs from the first mini-batch's own forward when that is exact (one
mini-batch per epoch, nothing in prepare reading them): one no-grad pass fewer, the same update."""

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


pytestmark = [pytest.mark.usefixtures("one_thread"), both_cpu_modes]  # exact: fp32 pinned


def _trainer(tiny_model, tmp_path, defer, **over):
    base = {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4, "rollout.n_samples": 4,
            "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8, "train.ppo_epochs": 3,
            "train.minibatch_size": 16, "train.micro_batch_size": 5, "train.lr": 1e-2, "train.threads": 1, **FP32, **over}
    model, tok = tiny_model
    trainer = RLTrainer(load_config(None, base), copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    trainer.defer_old_logp = defer
    passes = []
    inner = trainer._per_token
    trainer._per_token = lambda *a, **k: passes.append(1) or inner(*a, **k)  # counts no-grad passes
    return trainer, passes


def _learn_both(tiny_model, tmp_path, **over):
    plain, plain_passes = _trainer(tiny_model, tmp_path, False, **over)
    deferred, deferred_passes = _trainer(tiny_model, tmp_path, True, **over)
    trajs = plain.rollout()
    # rewards that differ within the first group only: a gradient to follow, and groups of equal rewards
    for i, t in enumerate(trajs):
        t.outcome_reward = float(i in (0, 2))
    before = torch.cat([p.detach().reshape(-1).clone() for p in plain.model.parameters()])
    return (plain.learn(trajs, 0.0), deferred.learn(trajs, 0.0), plain, deferred, before,
            len(plain_passes), len(deferred_passes))


def test_the_update_is_the_same_with_one_pass_fewer(tiny_model, tmp_path):
    m_plain, m_def, plain, deferred, before, n_plain, n_def = _learn_both(tiny_model, tmp_path)
    assert (n_plain, n_def) == (1, 0)
    flat = lambda t: torch.cat([p.detach().reshape(-1) for p in t.model.parameters()])  # noqa: E731
    moved, differ = float((flat(plain) - before).norm()), float((flat(deferred) - flat(plain)).norm())
    assert moved > 1e-2 and differ <= 1e-4 * moved, (moved, differ)
    for k in ("policy_loss", "entropy", "rollout/logprob_diff_max"):
        assert m_def[k] == pytest.approx(m_plain[k], rel=1e-4, abs=1e-6), k
    assert m_def["rollout/logprob_diff_max"] < 1e-4  # the deferred old log-probs are the engine's


def test_not_deferred_where_it_would_not_be_exact(tiny_model, tmp_path):
    # two mini-batches per epoch: the second runs after a step, so its old log-probs need the pass
    *_, n_plain, n_def = _learn_both(tiny_model, tmp_path, **{"train.minibatch_size": 8})
    assert (n_plain, n_def) == (1, 1)


def test_deferred_with_skipped_rows(tiny_model, tmp_path):
    # rows skipped by algo.skip_zero_advantage get no old log-probs; the drift metric covers the rest
    m_plain, m_def, *_, n_def = _learn_both(tiny_model, tmp_path, **{"algo.skip_zero_advantage": True})
    assert n_def == 0 and 0.0 < m_def["skipped_rows_fraction"] < 1.0
    assert m_def["policy_loss"] == pytest.approx(m_plain["policy_loss"], rel=1e-4, abs=1e-6)
    assert 0.0 < m_def["rollout/logprob_diff_max"] < 1e-4


@pytest.mark.parametrize("over", [{"model.lora.r": 4, "model.lora.dropout": 0.5}, {"model.dropout": 0.5}],
                         ids=["lora_dropout", "model_dropout"])
def test_not_deferred_where_dropout_makes_the_two_forwards_differ(tiny_model, tmp_path, over):
    """The training forward runs with dropout, the old-log-prob pass (and the engine) without: a
    deferred pass would take the old log-probs from a dropped-out forward."""
    if "model.dropout" in over:  # a dropout inside the model itself (its config), not an adapter's
        model = copy.deepcopy(tiny_model[0])
        model.config.attention_dropout = over["model.dropout"]
        for layer in model.model.layers:
            layer.self_attn.attention_dropout = over["model.dropout"]
        tiny_model, over = (model, tiny_model[1]), {}
    m_plain, m_def, *_, n_plain, n_def = _learn_both(tiny_model, tmp_path, **over)
    assert (n_plain, n_def) == (1, 1)
    assert m_def["rollout/logprob_diff_max"] < 1e-4  # the old log-probs are the engine's, not a dropped-out pass
