"""`algo.adv_estimator: gigpo` through the in-process trainer: `prepare` hands the
estimator collate's turn tensors, and an iteration (rollout, update) runs."""

from __future__ import annotations

import copy

import torch

from agent_r1.algos import compute_grpo, compute_step_advantages
from agent_r1.training.trainer import RLTrainer
from agent_r1.trajectory import Trajectory, Turn, collate
from tests.rollout_helpers import QA_SAMPLES, EchoSearch, make_env_factory, trainer_config

def _cfg(tmp_path, **over):
    return trainer_config(tmp_path, **{"rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8,
                                       "algo.adv_estimator": "gigpo", "algo.gigpo.step_weight": 0.5, **over})


def _trajs(tok):
    """One prompt, three samples: two reach the same search result (then answer right / wrong)."""
    ids = lambda text: tok.encode(text)  # noqa: E731
    prompt, obs = ids("Where was Karivo born?"), ids("<information>Telumas</information>")

    def turn(text, observation=(), reward=0.0):
        a = ids(text)
        return Turn(a, [-1.0] * len(a), text, observation_ids=list(observation), process_reward=reward)

    return [Trajectory("q0", prompt, [turn("<search>Karivo</search>", obs, 0.1), turn("<answer>Telumas</answer>")],
                       outcome_reward=1.0, stop_reason="answer"),
            Trajectory("q0", prompt, [turn("<search>Karivo born</search>", obs, 0.1),
                                      turn("<answer>Orvania</answer>")], outcome_reward=0.0, stop_reason="answer"),
            Trajectory("q0", prompt, [turn("<answer>Orvania</answer>")], outcome_reward=0.0, stop_reason="answer")]


def test_prepare_gives_gigpo_the_turn_tensors_and_an_iteration_runs(tiny_model, tmp_path):
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    trainer = RLTrainer(_cfg(tmp_path), model, tok, make_env_factory("tag", tool=EchoSearch("Telumas")), QA_SAMPLES)
    trajs = _trajs(tok)
    batch = trainer.prepare(trajs)
    ref = collate(trajs, tok.pad_token_id)
    episode = compute_grpo(ref["scores"], ref["group_ids"], ref["action_mask"])
    step = compute_step_advantages(ref["token_rewards"], ref["action_mask"], ref["turn_index"], ref["group_ids"],
                                   ref["context_keys"])
    assert torch.allclose(batch["advantages"], episode + 0.5 * step)
    assert step[1][ref["turn_index"][1] == 0].abs().sum() > 0  # the step part is not empty here
    assert "turn_index" not in batch and "context_keys" not in batch  # read once, never copied to the device
    metrics = trainer.train_step()
    assert trainer.iteration == 1
    assert all(v == v for v in metrics.values()), metrics  # no NaN anywhere
