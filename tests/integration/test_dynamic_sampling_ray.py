"""Dynamic sampling on Ray: the synchronous driver draws the same extra rounds, with the same seeds, as
the in-process trainer (one worker reproduces it exactly), and the asynchronous driver
(`train.max_staleness: 1`) rolls its extra rounds out with the current weights while round 0 comes
from the in-flight queue. The overlong penalty (applied by the workers' rollouts) gives the untrained
policy's groups different scores, some of them all equal, so some groups are dropped.
"""

from __future__ import annotations

import pytest
import torch

from agent_r1.algos.advantages import informative, split_groups
# the Ray tests' local cluster (3 CPUs), world (built once per module) and small config; only the algorithm differs
from tests.integration.test_ray_trainer import ITERATIONS, _ids, world  # noqa: F401
from tests.integration.test_ray_trainer import _cfg as _ray_cfg


def _cfg(root, name, **over):
    return _ray_cfg(root, name, **{"algo.adv_estimator": "grpo", "algo.kl_coef": 0.0,
                                   "algo.dynamic_sampling.enabled": True, "algo.dynamic_sampling.max_extra_rounds": 3,
                                   # the whole budget: a score that follows each episode's length
                                   "reward.overlong_buffer": 768, **over})


def _check_batch(metrics, trajs, cfg):
    assert all(informative(g) for g in split_groups(trajs, cfg.rollout.n_samples))
    assert metrics["groups_all_equal"] == 0.0
    assert metrics["dynamic/groups_kept"] == len(trajs) // cfg.rollout.n_samples
    assert metrics["dynamic/prompts_sampled"] == metrics["dynamic/rounds"] * cfg.train.prompts_per_iter
    assert metrics["overlong_penalty"] < 0  # applied by the workers


def test_sync_ray_equals_in_process_and_async_rolls_extra_rounds_with_current_weights(ray_session, world):
    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer
    from agent_r1.training.trainer import RLTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the learner and the worker: same reductions, same floats
    try:
        cfg = _cfg(world, "inproc")
        with Run(cfg) as run:
            parts = run.parts()
            trainer = RLTrainer(cfg, parts.model, parts.tokenizer, run.env_factory, parts.train_samples)
            reference = [(trainer.train_step(), trainer.last_trajectories) for _ in range(ITERATIONS)]
    finally:
        torch.set_num_threads(threads)
    assert any(m["dynamic/rounds"] > 1 for m, _ in reference), [m["dynamic/rounds"] for m, _ in reference]

    sync_cfg = _cfg(world, "sync", **{"ray.enabled": True, "ray.num_workers": 1})
    with RayTrainer(Run(sync_cfg).spec()) as ray_trainer:
        for m_ref, t_ref in reference:
            metrics = ray_trainer.train_step()
            assert _ids(ray_trainer.last_trajectories) == _ids(t_ref)  # same rounds, same seeds, same tokens
            for key in ("dynamic/rounds", "dynamic/prompts_sampled", "dynamic/groups_kept", "dynamic/groups_dropped",
                        "policy_loss", "reward_mean"):
                assert metrics[key] == pytest.approx(m_ref[key], abs=1e-6), key
            _check_batch(metrics, ray_trainer.last_trajectories, sync_cfg)
            rounds = {s.get("round", 0) for s in ray_trainer.last_shard_nodes}
            assert rounds == set(range(int(metrics["dynamic/rounds"])))  # every round's shards are recorded

    async_cfg = _cfg(world, "async", **{"ray.enabled": True, "ray.num_workers": 2, "train.max_staleness": 1,
                                        "train.iterations": 3})
    with RayTrainer(Run(async_cfg).spec()) as ray_trainer:
        extra_rounds = 0
        for _ in range(3):
            version = ray_trainer.version  # the learner's weights now: what extra rounds roll out with
            metrics = ray_trainer.train_step()
            trajs = ray_trainer.last_trajectories
            _check_batch(metrics, trajs, async_cfg)
            entry = ray_trainer.learn_log[-1]
            assert {t.policy_version for t in trajs} <= {entry["sampled_by"], version}
            assert metrics["staleness/max"] <= 1
            extra_rounds += metrics["dynamic/rounds"] > 1
            if metrics["dynamic/rounds"] > 1:
                assert all(s["version"] == version for s in ray_trainer.last_shard_nodes if s.get("round"))
        assert extra_rounds >= 1
