"""The learning benchmark's shuffled-reward control (benchmarks/learning.py): it must run through the
trainer's real `learn` (deferred old log-probs included) and permute the rewards, never drop or invent
one. It crashed with a TypeError once `prepare` gained the deferred-old-log-probs option."""

from __future__ import annotations

import copy

import pytest

from agent_r1.config import load_config
from agent_r1.training.trainer import RLTrainer
from benchmarks.learning import shuffle_scores
from tests.rollout_helpers import make_env_factory

NAMES = ["Karivo", "Bamena", "Tolusa", "Meriko"]
SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"]} for i, n in enumerate(NAMES)]

pytestmark = pytest.mark.usefixtures("one_thread")


def test_shuffled_control_permutes_rewards_inside_the_real_update(tiny_model, tmp_path):
    model, tok = tiny_model
    cfg = load_config(None, {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4,
                             "rollout.n_samples": 4, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8,
                             "train.minibatch_size": 16, "train.threads": 1})
    trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    assert trainer._can_defer_old_logp(16)  # the deferred path, where the control used to crash
    shuffle_scores(trainer)
    trajs = trainer.rollout()
    rewards = [float(i % 3 == 0) for i in range(len(trajs))]  # 6 of 16 rewarded, at known places
    for t, r in zip(trajs, rewards):
        t.outcome_reward = r
    metrics = trainer.learn(trajs, 0.0)  # the path the benchmark runs, deferred old log-probs and all
    after = [t.outcome_reward for t in trajs]
    assert sorted(after) == sorted(rewards)  # a permutation: nothing dropped or invented
    assert after != rewards  # and the rewards did move between trajectories
    assert "policy_loss" in metrics
