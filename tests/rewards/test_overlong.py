"""DAPO's soft overlong punishment (`reward.overlong_buffer`, `reward.overlong_penalty`): hand values
in its three regions, the config's checks, and a rollout whose scores and token rewards include it."""

from __future__ import annotations

import pytest

from agent_r1.config import load_config
from agent_r1.rewards.scoring import RewardConfig, overlong_reward


def test_hand_values_in_the_three_regions():
    rc = RewardConfig(overlong_buffer=100, overlong_penalty=0.5)  # Lmax 400: the ramp is (300, 400]
    assert overlong_reward(0, 400, rc) == 0.0
    assert overlong_reward(300, 400, rc) == 0.0  # up to Lmax - buffer: no penalty
    assert overlong_reward(301, 400, rc) == pytest.approx(-0.005)
    assert overlong_reward(350, 400, rc) == pytest.approx(-0.25)  # halfway: half the penalty
    assert overlong_reward(400, 400, rc) == pytest.approx(-0.5)  # the budget itself: all of it
    assert overlong_reward(460, 400, rc) == pytest.approx(-0.5)  # beyond: capped
    assert overlong_reward(399, 400, RewardConfig()) == 0.0  # buffer 0: off
    assert overlong_reward(10, 400, RewardConfig(overlong_buffer=400)) == pytest.approx(-10 / 400)  # default 1.0


def test_config_checks_name_the_keys():
    cfg = load_config(None, {"reward.overlong_buffer": 64, "reward.overlong_penalty": 2.0})
    assert (cfg.reward.overlong_buffer, cfg.reward.overlong_penalty) == (64, 2.0)
    with pytest.raises(ValueError, match="reward.overlong_buffer=800.*rollout.max_total_tokens=768"):
        load_config(None, {"reward.overlong_buffer": 800})
    with pytest.raises(ValueError, match="reward.overlong_buffer"):
        load_config(None, {"reward.overlong_buffer": -1})
    with pytest.raises(ValueError, match="reward.overlong_penalty"):
        load_config(None, {"reward.overlong_penalty": -0.5})


def test_a_sample_may_only_make_it_harsher():
    from agent_r1.envs.tool_env import EnvConfig, check_sample_env

    run = RewardConfig(overlong_buffer=64, overlong_penalty=1.0)
    _, mine = check_sample_env({"reward": {"overlong_buffer": 128, "overlong_penalty": 2.0}}, EnvConfig(), run)
    assert (mine.overlong_buffer, mine.overlong_penalty) == (128, 2.0)
    for key, value in (("overlong_buffer", 0), ("overlong_penalty", 0.5)):
        with pytest.raises(ValueError, match=f"reward.{key}"):
            check_sample_env({"reward": {key: value}}, EnvConfig(), run)


def test_rollout_scores_and_token_rewards_include_the_penalty(tiny_model):
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.loop import run_rollout
    from agent_r1.sampling import RolloutConfig
    from agent_r1.trajectory import collate
    from tests.rollout_helpers import RecordingEngine, make_env_factory

    model, tok = tiny_model
    samples = [{"id": "q1", "question": "Where was Karivo born?", "answers": ["Telumas"]}]
    cfg = RolloutConfig(max_turns=2, max_tokens_per_turn=8, max_observation_tokens=20, max_total_tokens=400,
                        n_samples=2)

    def roll(reward):
        return run_rollout(RecordingEngine(model, tok), ChatCodec(tok), make_env_factory("tag", reward=reward),
                           samples, cfg, reward, seed=0)

    plain = roll(RewardConfig())
    shaped_cfg = RewardConfig(overlong_buffer=400, overlong_penalty=2.0)  # the whole budget is the ramp
    shaped = roll(shaped_cfg)
    assert [t.token_ids for t in shaped] == [t.token_ids for t in plain]  # same seed: same episodes
    assert all("overlong_penalty" not in t.metrics for t in plain)
    batch = collate(shaped, tok.pad_token_id)
    for i, (s, p) in enumerate(zip(shaped, plain)):
        penalty = -2.0 * len(s.token_ids) / 400
        assert s.metrics["overlong_penalty"] == pytest.approx(penalty)
        assert s.outcome_reward == pytest.approx(p.outcome_reward + penalty)
        assert s.score == pytest.approx(p.score + penalty)
        assert float(batch["token_rewards"][i].sum()) == pytest.approx(s.score, abs=1e-5)
        assert float(batch["scores"][i]) == pytest.approx(s.score, abs=1e-6)
