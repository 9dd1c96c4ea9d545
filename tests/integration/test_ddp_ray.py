"""`ray.num_learners`: 2 Ray learner actors against one over 2 iterations, and 2 FSDP learner
actors (over gloo, a path only tests open) through a checkpoint and a resume, evaluation included.
The in-process ranks over gloo are tests/integration/test_ddp.py; on GPUs (NCCL) both run in
`bash benchmarks/fsdp_check.sh` (AGENT_R1_TEST_DEVICE=cuda)."""

from __future__ import annotations

import pytest
import torch

from tests.integration.test_ddp import DEVICE, TOL
from tests.integration.test_ray_trainer import _cfg, world  # noqa: F401  (the module's data)


def _ray_learners(world_dir, name, learners, iterations=2, fsdp=False, resume=False, finish=False, device="cpu"):
    """`iterations` steps, each (metrics, trajectories, learner weights); with `finish`, then
    (evaluation, checkpoint folder). `device` "cuda": a GPU per learner and per rollout worker
    (benchmarks/fsdp_check.sh; a worker without one could not unpickle the learner's CUDA snapshot)."""
    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer

    # an entropy bonus: a random policy scores 0 everywhere, so without it the true gradient is 0 and
    # AdamW (g / (|g| + eps)) would turn float noise of ~1e-8 into lr-sized steps in either run
    gpu = {"train.device": "cuda", "ray.gpus_per_worker": 1, "rollout.engine": "transformers"} if device == "cuda" else {}
    cfg = _cfg(world_dir, name, **{"ray.num_workers": 1, "algo.entropy_coef": 0.01, **gpu})
    cfg.ray.num_learners = learners
    cfg.train.fsdp = fsdp  # set on the built config: load_config refuses train.fsdp on CPU
    steps = []
    with RayTrainer(Run(cfg, resume).spec(), allow_cpu_fsdp=fsdp and device == "cpu") as trainer:
        for _ in range(iterations):
            metrics = trainer.train_step()
            steps.append((metrics, trainer.last_trajectories, trainer.learner_weights()))
        end = (trainer.evaluate(), trainer.save()) if finish else None
    return steps, end


@pytest.fixture(scope="module")
def one_learner(ray_session, world):  # noqa: F811  (imported fixtures)
    return _ray_learners(world, "learners1", 1, finish=True, device=DEVICE)


def _max_diff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in b)


def _same_step(one, other):
    (m1, t1, [w1]), (m2, t2, [w2, *_]) = one, other
    assert _max_diff(w2, w1) <= TOL, _max_diff(w2, w1)
    assert [t.token_ids for t in t2] == [t.token_ids for t in t1]  # same prompts, same samples
    for key in ("policy_loss", "value_loss", "kl", "grad_norm"):
        assert m2[key] == pytest.approx(m1[key], abs=TOL), key


def test_two_learner_actors_equal_one(one_learner, world):  # noqa: F811  (imported fixtures)
    one, _ = one_learner
    two, _ = _ray_learners(world, "learners2", 2)
    for step1, step2 in zip(one, two):
        w2a, w2b = step2[2]
        assert all(torch.equal(w2a[k], w2b[k]) for k in w2a)  # the two replicas, bit for bit
        _same_step(step1, step2)
    first = one[0][2][0]
    assert _max_diff(one[-1][2][0], first) > 0  # the weights moved


def test_fsdp_learner_actors_equal_one_through_a_resume(one_learner, world):  # noqa: F811
    """`train.fsdp` on 2 Ray learners, over gloo (the switch only tests open): iteration 1, a
    checkpoint, then a resumed run's iteration 2. The workers roll out with the gathered weights;
    the checkpoint holds full weights and optimiser state (the resumed Adam step would differ
    otherwise), and evaluation (rank 0 over gathered layers) equals one unsharded learner's.
    On GPUs (NCCL) the same check is part of `bash benchmarks/fsdp_check.sh`."""
    check_fsdp_learner_actors(world, one_learner, DEVICE)


def check_fsdp_learner_actors(world, one_learner, device="cpu"):  # noqa: F811
    from agent_r1.training.checkpoint import load_state

    one, (evaluation, saved) = one_learner
    first, (_, path1) = _ray_learners(world, "fsdp", 2, iterations=1, fsdp=True, finish=True, device=device)
    assert path1.name == "iter_000001" and len(first[0][2]) == 1  # rank 0's full weights only
    _same_step(one[0], first[0])
    resumed, (fsdp_evaluation, path2) = _ray_learners(world, "fsdp", 2, iterations=1, fsdp=True, resume=True,
                                                      finish=True, device=device)
    _same_step(one[1], resumed[0])
    assert fsdp_evaluation.keys() == evaluation.keys() and evaluation
    assert fsdp_evaluation == pytest.approx(evaluation, abs=TOL)
    # the checkpoint an unsharded run would write: optimiser state keyed by index, full tensors
    ref, got = load_state(saved)["optimizer"], load_state(path2)["optimizer"]
    assert got["state"].keys() == ref["state"].keys()
    for i, state in ref["state"].items():
        for k, v in state.items():
            assert got["state"][i][k].shape == v.shape
            assert float((got["state"][i][k] - v).abs().max()) <= TOL, (i, k)
