"""GiGPO over agent sessions split into steps: the episode part counts each session once (as GRPO
does through algos/advantages.py), so `algo.gigpo.step_weight: 0` is GRPO exactly there too."""

from __future__ import annotations

import torch

from agent_r1.algos import ADV_ESTIMATORS, AdvantageInputs, GiGPOConfig
from agent_r1.algos.advantages import estimator_over_sessions
from agent_r1.trajectory import Trajectory, Turn, collate


def _turn(action, obs=()):
    return Turn(action_ids=list(action), action_logprobs=[-1.0] * len(action), action_text="",
                observation_ids=list(obs))


def _split_batch():
    """q1: session 0 drifted once (two steps, reward 1), sessions 1 and 2 one step each (reward 0, 1);
    q2: two one-step sessions (0 and 1). As rows, session 0 would weigh twice in q1's mean and std."""
    rows = [("q1", "q1/0", [1, 2], 1.0), ("q1", "q1/0", [1, 2, 10, 50, 3], 1.0), ("q1", "q1/1", [1, 2], 0.0),
            ("q1", "q1/2", [1, 2], 1.0), ("q2", "q2/3", [4], 0.0), ("q2", "q2/4", [4], 1.0)]
    trajs = [Trajectory(sid, prompt, [_turn([20 + i], [60]), _turn([30 + i])], outcome_reward=r, session_id=sess)
             for i, (sid, sess, prompt, r) in enumerate(rows)]
    return collate(trajs, 0)


def _inputs(b, **kw):
    return AdvantageInputs(token_rewards=b["token_rewards"], scores=b["scores"], action_mask=b["action_mask"],
                           group_ids=b["group_ids"], turn_index=b["turn_index"], context_keys=b["context_keys"],
                           session_ids=b["session_ids"], **kw)


def test_step_weight_zero_is_grpo_over_sessions_exactly():
    b = _split_batch()
    grpo = estimator_over_sessions("grpo")(_inputs(b)).advantages
    gigpo = estimator_over_sessions("gigpo")(_inputs(b, gigpo=GiGPOConfig(step_weight=0.0))).advantages
    assert torch.equal(gigpo, grpo)


def test_both_steps_of_a_session_get_its_episode_advantage():
    b = _split_batch()
    adv = ADV_ESTIMATORS["gigpo"](_inputs(b, gigpo=GiGPOConfig(step_weight=0.0))).advantages
    on = b["action_mask"] > 0
    assert torch.equal(adv[0][on[0]].unique(), adv[1][on[1]].unique())
    # q1's sessions scored 1, 0, 1: session 0's advantage is GRPO's over three sessions, not four rows
    scores = torch.tensor([1.0, 0.0, 1.0])
    expected = (1.0 - scores.mean()) / (scores.std() + 1e-6)
    assert torch.allclose(adv[0][on[0]], expected.expand(int(on[0].sum())))
