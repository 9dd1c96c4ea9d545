"""configs/recipes/*.yaml: the objectives beyond GRPO (DAPO, GSPO, Dr. GRPO, CISPO, GiGPO) as presets on the
paper's setup. Each loads through `load_config` and holds its reference's values, written out here (not
read from configs/make.py, so a wrong value in the generator fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_r1.config import load_config

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "configs" / "recipes"

# recipe -> (estimator, policy loss, clip_low, clip_high, loss aggregation, KL coefficient)
EXPECTED = {
    "dapo": ("grpo", "ppo", 0.2, 0.28, "token-mean", 0.0),
    "gspo": ("grpo", "gspo", 3e-4, 4e-4, "seq-mean-token-mean", 0.0),
    "dr_grpo": ("dr_grpo", "ppo", 0.2, 0.2, "seq-mean-token-sum-norm", 0.0),
    "cispo": ("grpo", "cispo", None, 4.0, "token-mean", 0.0),  # weights capped at 1 + 4 (TRL's 5); no lower bound
    "gigpo": ("gigpo", "ppo", 0.2, 0.2, "token-mean", 0.001),
}


def test_every_expected_recipe_is_there_and_no_other():
    assert sorted(p.stem for p in RECIPES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipe_holds_its_references_values(name):
    c = load_config(RECIPES / f"{name}.yaml")
    estimator, loss, clip_low, clip_high, agg, kl = EXPECTED[name]
    assert (c.algo.adv_estimator, c.algo.policy_loss, c.algo.kl_coef) == (estimator, loss, kl)
    for key, want in (("clip_low", clip_low), ("clip_high", clip_high), ("loss_agg", agg)):
        if want is not None:  # CISPO has no lower bound: clip_low is unused
            assert getattr(c.algo, key) == want, key
    # the paper's setup underneath: Qwen2.5-3B-Instruct, groups of 5, 128 questions, critic-free
    assert c.model.name_or_path == "Qwen/Qwen2.5-3B-Instruct"
    assert (c.rollout.n_samples, c.train.prompts_per_iter, c.train.minibatch_size) == (5, 128, 320)
    assert (c.train.experiment, c.train.run_name) == ("recipes", name)


def test_dapo_samples_dynamically_and_shapes_overlong_answers():
    c = load_config(RECIPES / "dapo.yaml")
    assert c.algo.dynamic_sampling.enabled and c.algo.dynamic_sampling.max_extra_rounds == 3
    # the soft penalty covers the last 20% of the trajectory budget, as DAPO's 4,096 of 20,480
    assert c.reward.overlong_buffer == int(0.2 * c.rollout.max_total_tokens)
    assert c.reward.overlong_penalty == 1.0


def test_gigpo_weighs_its_step_advantages_fully():
    assert load_config(RECIPES / "gigpo.yaml").algo.gigpo.step_weight == 1.0
