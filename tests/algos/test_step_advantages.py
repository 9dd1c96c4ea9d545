"""The `gigpo` estimator (step-level credit for multi-turn agents): hand-computed step
advantages on a hand-built batch, the motivating case (a good search in a failed trajectory is not
punished like its bad answer), singleton groups, omega = 0 == GRPO, masked turns, the anchor modes,
collate's turn tensors, the config keys, and one trainer iteration."""

from __future__ import annotations

import math

import pytest
import torch

from agent_r1.algos import ADV_ESTIMATORS, AdvantageInputs, GiGPOConfig, compute_grpo, compute_step_advantages
from agent_r1.algos.advantages import step_returns
from agent_r1.config import load_config
from agent_r1.trajectory import Trajectory, Turn, _digest, collate

PAD = 0
D, F, G = [50, 51], [70, 71], [80]  # observations (search results)


def _turn(action, obs=(), reward=0.0, masked=False):
    return Turn(action_ids=list(action), action_logprobs=[-1.0] * len(action), action_text="", masked=masked,
                observation_ids=list(obs), process_reward=reward)


def _batch():
    """2 prompts x 3 trajectories (1-3 turns); actions are worded differently in every trajectory.

    q1: A searches -> D (+0.1), answers right (1);  B searches otherwise -> D (+0.1), answers wrong;
        C answers wrong at once.
    q2: X searches -> D (+0.1), -> F (+0.1), answers right;  Y searches -> D (+0.1), -> G, answers wrong;
        Z searches -> F (+0.1), answers wrong.
    """
    p1, p2 = [1, 2], [3, 4]
    trajs = [
        Trajectory("q1", p1, [_turn([10, 11], D, 0.1), _turn([12])], outcome_reward=1.0),
        Trajectory("q1", p1, [_turn([13, 14, 15], D, 0.1), _turn([16, 17])], outcome_reward=0.0),
        Trajectory("q1", p1, [_turn([18])], outcome_reward=0.0),
        Trajectory("q2", p2, [_turn([20], D, 0.1), _turn([21], F, 0.1), _turn([22, 23])], outcome_reward=1.0),
        Trajectory("q2", p2, [_turn([24, 25], D, 0.1), _turn([26], G), _turn([27])], outcome_reward=0.0),
        Trajectory("q2", p2, [_turn([28], F, 0.1), _turn([29, 30])], outcome_reward=0.0),
    ]
    return trajs, collate(trajs, PAD)


def _inputs(b, **kw):
    return AdvantageInputs(token_rewards=b["token_rewards"], scores=b["scores"], action_mask=b["action_mask"],
                           group_ids=b["group_ids"], turn_index=b["turn_index"], context_keys=b["context_keys"], **kw)


def _per_turn(adv, b):
    """[B, T] -> {(row, turn): the value on that turn's action tokens} (asserting it is one value)."""
    out = {}
    for r in range(adv.shape[0]):
        for k in range(int(b["turn_index"][r].max()) + 1):
            on = (b["turn_index"][r] == k) & (b["action_mask"][r] > 0)
            if on.any():
                vals = adv[r][on]
                assert torch.allclose(vals, vals[0].expand_as(vals)), (r, k, vals)
                out[(r, k)] = float(vals[0])
    return out


def _steps(b, **kw):
    return _per_turn(compute_step_advantages(b["token_rewards"], b["action_mask"], b["turn_index"], b["group_ids"],
                                             b["context_keys"], **kw), b)


def test_step_returns_sum_process_rewards_and_outcome_per_turn():
    _, b = _batch()
    g = step_returns(b["token_rewards"], b["turn_index"], gamma=1.0)
    assert g[0, :2].tolist() == pytest.approx([1.1, 1.0]) and g[2, 0].item() == 0.0
    assert g[3].tolist() == pytest.approx([1.2, 1.1, 1.0]) and g[4].tolist() == pytest.approx([0.1, 0.0, 0.0])
    g9 = step_returns(b["token_rewards"], b["turn_index"], gamma=0.9)
    assert g9[3].tolist() == pytest.approx([0.1 + 0.9 * 0.1 + 0.81 * 1.0, 0.1 + 0.9 * 1.0, 1.0])


def test_hand_computed_step_advantages_without_std():
    _, b = _batch()
    s = _steps(b, normalize_std=False)
    # q1 turn 0 (the prompt): returns A 1.1, B 0.1, C 0 -> mean 0.4; turn 1 after D: A 1, B 0 -> mean 0.5
    assert [s[(0, 0)], s[(1, 0)], s[(2, 0)]] == pytest.approx([0.7, -0.3, -0.4])
    assert [s[(0, 1)], s[(1, 1)]] == pytest.approx([0.5, -0.5])
    # q2 turn 0: X 1.2, Y 0.1, Z 0.1 -> mean 1.4/3; turn 1 after D: X 1.1, Y 0 -> mean 0.55
    m = 1.4 / 3
    assert [s[(3, 0)], s[(4, 0)], s[(5, 0)]] == pytest.approx([1.2 - m, 0.1 - m, 0.1 - m])
    assert [s[(3, 1)], s[(4, 1)]] == pytest.approx([0.55, -0.55])
    # singleton step groups: Z after F, X after D+F, Y after D+G
    assert s[(5, 1)] == 0.0 and s[(3, 2)] == 0.0 and s[(4, 2)] == 0.0


def test_hand_computed_step_advantages_with_std_and_the_combined_advantage():
    _, b = _batch()
    s = _steps(b, normalize_std=True)
    std0 = math.sqrt((0.7 ** 2 + 0.3 ** 2 + 0.4 ** 2) / 2)  # Bessel's correction, as GRPO
    assert [s[(0, 0)], s[(1, 0)], s[(2, 0)]] == pytest.approx([0.7 / std0, -0.3 / std0, -0.4 / std0], rel=1e-5)
    assert [s[(0, 1)], s[(1, 1)]] == pytest.approx([0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5)], rel=1e-5)
    adv = ADV_ESTIMATORS["gigpo"](_inputs(b, gigpo=GiGPOConfig(step_weight=0.5))).advantages
    episode = _per_turn(compute_grpo(b["scores"], b["group_ids"], b["action_mask"]), b)
    total = _per_turn(adv, b)
    assert total.keys() == s.keys()
    for key in s:
        assert total[key] == pytest.approx(episode[key] + 0.5 * s[key], abs=1e-5), key
    assert torch.all(adv[b["action_mask"] == 0] == 0)  # prompt, observations, padding


def test_a_good_search_in_a_failed_trajectory_is_not_punished_like_its_bad_answer():
    """B searched well (reached D, as the successful A) and answered wrong: GRPO gives both of its
    turns the same negative advantage; gigpo's step part ranks the search above the answer."""
    _, b = _batch()
    grpo = _per_turn(compute_grpo(b["scores"], b["group_ids"], b["action_mask"]), b)
    assert grpo[(1, 0)] == grpo[(1, 1)] < 0
    for norm in (True, False):
        gigpo = _per_turn(ADV_ESTIMATORS["gigpo"](_inputs(b, gigpo=GiGPOConfig(step_normalize_std=norm))).advantages,
                          b)
        assert gigpo[(1, 0)] > gigpo[(1, 1)]  # the search turn, above the answer turn
        assert gigpo[(1, 0)] > gigpo[(2, 0)]  # and above C's immediate wrong answer
        assert gigpo[(4, 0)] > gigpo[(4, 1)]  # the same in q2: Y's first search beats its fruitless second


def test_step_weight_zero_is_grpo_exactly():
    _, b = _batch()
    grpo = compute_grpo(b["scores"], b["group_ids"], b["action_mask"])
    gigpo = ADV_ESTIMATORS["gigpo"](_inputs(b, gigpo=GiGPOConfig(step_weight=0.0))).advantages
    assert torch.equal(gigpo, grpo)
    assert not torch.equal(ADV_ESTIMATORS["gigpo"](_inputs(b)).advantages, grpo)  # the default weight is not 0


def test_singleton_groups_give_zero_step_advantage():
    """One trajectory per prompt: every step group is a singleton (and GRPO's group too)."""
    trajs = [Trajectory(f"q{i}", [1, 2 + i], [_turn([10 + i], D, 0.1), _turn([20 + i])], outcome_reward=float(i))
             for i in range(3)]
    b = collate(trajs, PAD)
    assert set(_steps(b).values()) == {0.0}
    assert torch.all(ADV_ESTIMATORS["gigpo"](_inputs(b)).advantages == 0)


def test_equal_returns_in_a_group_give_exactly_zero():
    trajs = [Trajectory("q", [1], [_turn([10 + i], D, 0.1), _turn([20])], outcome_reward=0.1) for i in range(3)]
    b = collate(trajs, PAD)
    assert set(_steps(b, normalize_std=True).values()) == {0.0}


def test_last_observation_anchor_groups_turns_that_reached_the_same_results_by_another_path():
    _, b = _batch()
    obs = _steps(b, normalize_std=False, anchor="observations")
    last = _steps(b, normalize_std=False, anchor="last_observation")
    # X reached F after D+F (turn 2), Z after F alone (turn 1): one group only with the newest context
    assert obs[(3, 2)] == 0.0 and obs[(5, 1)] == 0.0
    assert [last[(3, 2)], last[(5, 1)]] == pytest.approx([0.5, -0.5])
    # q1 turn 1 after D: the same group under both
    assert last[(0, 1)] == obs[(0, 1)] == pytest.approx(0.5)
    # actions never enter the anchor: A and B worded their searches differently and still share turn 1
    assert b["context_keys"][0][1] == b["context_keys"][1][1] == _digest(D)


def test_groups_never_cross_prompt_groups():
    """Two prompt groups with the same prompt ids and search results: merged, qb's turns would get
    -0.25 (returns 1, 0 | 0, 0 around a mean of 0.25); kept apart, qb's equal returns give 0."""
    trajs = [Trajectory(g, [1, 2], [_turn([10 + i]), ], outcome_reward=r)
             for i, (g, r) in enumerate([("qa", 1.0), ("qa", 0.0), ("qb", 0.0), ("qb", 0.0)])]
    s = _steps(collate(trajs, PAD), normalize_std=False)
    assert [s[(0, 0)], s[(1, 0)], s[(2, 0)], s[(3, 0)]] == pytest.approx([0.5, -0.5, 0.0, 0.0])


def test_collate_turn_tensors_with_a_masked_turn():
    """turn 1 is masked (a truncated action): its tokens carry turn index 1 but action mask 0; its
    process reward moves to turn 0's last action token (as token_rewards does) and so enters turn 0's
    step return; the masked turn joins no step group and gets no advantage."""
    traj = Trajectory("q", [1, 2, 3], [_turn([10, 11], [40], 0.1), _turn([12, 13, 14], [41, 42], 0.2, masked=True),
                                       _turn([15])], outcome_reward=1.0)
    short = Trajectory("q", [1, 2, 3], [_turn([16])], outcome_reward=0.0)
    b = collate([traj, short], PAD)
    assert b["turn_index"].dtype == torch.long
    assert b["turn_index"][0].tolist() == [-1, -1, -1, 0, 0, 0, 1, 1, 1, 1, 1, 2]
    assert b["turn_index"][1].tolist() == [-1, -1, -1, 0] + [-1] * 8  # padding is -1
    assert b["action_mask"][0].tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    assert b["context_keys"] == [[_digest([1, 2, 3]), _digest([40]), _digest([41, 42])], [_digest([1, 2, 3])]]
    assert b["token_rewards"][0, 4].item() == pytest.approx(0.3)  # turn 0 carries the masked turn's 0.2
    g = step_returns(b["token_rewards"], b["turn_index"], gamma=1.0)
    assert g[0].tolist() == pytest.approx([1.3, 1.0, 1.0])
    adv = compute_step_advantages(b["token_rewards"], b["action_mask"], b["turn_index"], b["group_ids"],
                                  b["context_keys"], normalize_std=False)
    assert adv[0, 3].item() == pytest.approx(0.65) and adv[1, 3].item() == pytest.approx(-0.65)  # turn 0: 1.3 vs 0
    assert torch.all(adv[0, 6:11] == 0) and adv[0, 11].item() == 0.0  # masked turn; turn 2 is a singleton


def test_gigpo_needs_the_turn_tensors_and_is_a_group_estimator():
    _, b = _batch()
    x = AdvantageInputs(token_rewards=b["token_rewards"], scores=b["scores"], action_mask=b["action_mask"],
                        group_ids=b["group_ids"])
    with pytest.raises(ValueError, match="'gigpo' needs AdvantageInputs.turn_index and .context_keys"):
        ADV_ESTIMATORS["gigpo"](x)
    assert ADV_ESTIMATORS.traits("gigpo").group and not ADV_ESTIMATORS.traits("gigpo").critic
    with pytest.raises(ValueError, match="context_keys"):
        compute_step_advantages(b["token_rewards"], b["action_mask"], b["turn_index"], b["group_ids"],
                                b["context_keys"][:-1])


def test_config_keys_and_their_errors():
    cfg = load_config(overrides={"algo.adv_estimator": "gigpo", "algo.gigpo.step_weight": 0.5,
                                 "algo.gigpo.anchor": "last_observation", "algo.gigpo.step_normalize_std": False})
    assert cfg.algo.gigpo == GiGPOConfig(step_weight=0.5, step_normalize_std=False, anchor="last_observation")
    assert load_config().algo.gigpo == GiGPOConfig()
    with pytest.raises(ValueError, match=r"algo\.gigpo\.anchor='state'; choose one of"):
        load_config(overrides={"algo.adv_estimator": "gigpo", "algo.gigpo.anchor": "state"})
    with pytest.raises(ValueError, match=r"algo\.gigpo\.step_weight must be in \[0, 1000\]"):
        load_config(overrides={"algo.adv_estimator": "gigpo", "algo.gigpo.step_weight": -1})
    with pytest.raises(ValueError, match=r"rollout\.n_samples >= 2"):
        load_config(overrides={"algo.adv_estimator": "gigpo", "rollout.n_samples": 1})
