"""Agent sessions of several steps in group estimators (algos/advantages.py): each session counts once
and gives its advantage to every step (as SkyRL's step-wise training), checked by hand on small tensors;
rows of their own (every built-in env) are computed exactly as before."""

from __future__ import annotations

import pytest
import torch

from agent_r1.agents.assemble import assign_outcome, build_trajectories
from agent_r1.agents.records import CallRecord
from agent_r1.algos import ADV_ESTIMATORS, AdvantageInputs
from agent_r1.algos.advantages import estimator_over_sessions, last_step_rows, per_session
from agent_r1.trajectory import collate


def inputs(scores, groups, sessions, width=3):
    mask = torch.ones((len(scores), width))
    mask[:, 0] = 0.0  # a prompt token
    s = torch.tensor(scores, dtype=torch.float32)
    return AdvantageInputs(token_rewards=torch.zeros_like(mask), scores=s, action_mask=mask, group_ids=groups,
                           session_ids=sessions)


def test_a_session_of_three_steps_counts_once_in_its_group():
    # prompt p: session A (3 steps, right) and session B (1 step, wrong)
    x = inputs([1.0, 1.0, 1.0, 0.0], ["p"] * 4, ["A", "A", "A", "B"])
    adv = per_session(ADV_ESTIMATORS["grpo"])(x).advantages
    a, b = adv[0, 1].item(), adv[3, 1].item()
    assert a == pytest.approx(-b) and a > 0  # two sessions, one right: opposite advantages
    assert torch.equal(adv[:3], adv[:1].expand(3, -1))  # every step of A gets A's advantage
    assert torch.all(adv[:, 0] == 0)  # nothing on the prompt token
    rows = ADV_ESTIMATORS["grpo"](x).advantages  # as rows, A would be 3 of 4 and its advantage smaller
    assert rows[0, 1].item() < a and rows[0, 1].item() != pytest.approx(-rows[3, 1].item())


def test_rloo_over_sessions_by_hand():
    # sessions S1 (2 steps, 1.0), S2 (0.0), S3 (0.0): A_i = s_i - mean of the other sessions
    x = inputs([1.0, 1.0, 0.0, 0.0], ["p"] * 4, ["S1", "S1", "S2", "S3"])
    adv = per_session(ADV_ESTIMATORS["rloo"])(x).advantages[:, 1]
    assert adv.tolist() == pytest.approx([1.0, 1.0, -0.5, -0.5])


def test_groups_stay_apart_and_the_last_step_is_the_sessions_row():
    assert last_step_rows(["A", "A", "B", "C", "C", "C"]) == [1, 2, 5]
    x = inputs([1.0, 1.0, 0.0, 0.0, 1.0, 1.0], ["p", "p", "p", "q", "q", "q"], ["A", "A", "B", "C", "D", "D"])
    adv = per_session(ADV_ESTIMATORS["grpo_no_std"])(x).advantages[:, 1]
    assert adv.tolist() == pytest.approx([0.5, 0.5, -0.5, -0.5, 0.5, 0.5])


@pytest.mark.parametrize("name", ["grpo", "grpo_no_std", "dr_grpo", "rloo", "reinforce_pp_baseline"])
def test_rows_of_their_own_are_computed_exactly_as_before(name):
    x = inputs([1.0, 0.0, 0.5, 0.0, 1.0, 1.0], ["p", "p", "p", "q", "q", "q"], [0, 1, 2, 3, 4, 5])
    assert torch.equal(estimator_over_sessions(name)(x).advantages, ADV_ESTIMATORS[name](x).advantages)
    assert ADV_ESTIMATORS.traits(name).scalar


def test_token_level_and_turn_level_estimators_are_left_alone():
    for name in ("gae", "reinforce_pp", "gigpo"):
        assert not ADV_ESTIMATORS.traits(name).scalar
        assert estimator_over_sessions(name) is ADV_ESTIMATORS[name]


def test_a_drifted_sessions_steps_share_its_id_through_collate():
    def rec(prompt, completion):
        return CallRecord(list(prompt), list(completion), [-0.1] * len(completion), "stop", messages=1,
                          temperature=1.0, info={})

    steps, stats = build_trajectories([rec([1, 2], [3]), rec([1, 9], [4])], "p", {"id": "p"}, session_id="p/0")
    other, _ = build_trajectories([rec([1, 2], [5])], "p", {"id": "p"}, session_id="p/1")
    assign_outcome(steps, 1.0)
    assert stats.drift == 1 and [s.session_id for s in steps] == ["p/0", "p/0"]
    assert collate(steps + other, pad_token_id=0)["session_ids"] == ["p/0", "p/0", "p/1"]
    assert steps[0].to_dict()["session_id"] == "p/0"
