"""The data-parallel learner (agent_r1/training/distributed.py): two learner ranks over gloo end an
update with the weights of one learner on the same batch (within 1e-5), for GRPO and for PPO with
a critic; and `train.fsdp` is refused on a CPU learner, naming the key.

The batch is rolled out once in the parent (a warm-started tiny model, a real tool env) and handed
to each rank, which builds the same trainer, joins a gloo group on 127.0.0.1 and runs one `learn`.
FSDP itself needs CUDA: `benchmarks/fsdp_check.sh` runs it on a GPU host.

The same on Ray learner actors is tests/integration/test_ddp_ray.py (apart, so that these tests,
which start no Ray, are not part of `make test`'s Ray unit: tests/isolation.py).
"""

from __future__ import annotations

import copy
import os
from types import SimpleNamespace

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.precision import CPU_BF16_ENV
from agent_r1.training.distributed import free_address, join, leave
from agent_r1.training.fsdp import check_fsdp
from agent_r1.training.trainer import RLTrainer
from tests import forked
from tests.precision_modes import FP32
from tests.rollout_helpers import make_env_factory
from tests.training.test_trainer import SAMPLES, _warm_model

TOL = 1e-5
# `bash benchmarks/fsdp_check.sh` runs the FSDP tests on a GPU host with AGENT_R1_TEST_DEVICE=cuda
# (NCCL, min(2, GPUs) ranks, both estimators); the suite runs them here over gloo
DEVICE = os.environ.get("AGENT_R1_TEST_DEVICE", "cpu")


def _over(tmp_path, estimator: str) -> dict:
    # 16 trajectories, mini-batches of 6 (6, 6, 4: shares 3/3 and 2/2), micro-batches of 2, 2 epochs
    return {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 4, "rollout.n_samples": 4,
            "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8, "train.ppo_epochs": 2,
            "train.minibatch_size": 6, "train.micro_batch_size": 2, "train.lr": 1e-3, "train.eval_every": 0,
            "train.threads": 1, "algo.adv_estimator": estimator, "algo.kl_coef": 0.01, "algo.entropy_coef": 0.01,
            **FP32}


def _weights(trainer) -> dict[str, torch.Tensor]:
    out = {f"policy.{k}": v.detach().clone() for k, v in trainer.model.state_dict().items()}
    if trainer.critic is not None:
        out.update({f"critic.{k}": v.detach().clone() for k, v in trainer.critic.state_dict().items()})
    return out


def _learn(over, model, tok, trajs):
    trainer = RLTrainer(load_config(None, over), copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    return trainer, trainer.learn(trajs, 0.0)


def _rank(rank, ranks, address, over, model, tok, trajs, out_dir, fsdp=False):
    """One learner rank (a spawned process): join, learn once, save weights and metrics."""
    torch.set_num_threads(1)
    if over.get("train.device") == "cuda":  # NCCL: one GPU per rank
        over = {**over, "train.device": f"cuda:{rank}"}
        torch.cuda.set_device(rank)
    cfg = load_config(None, over)
    cfg.train.fsdp = fsdp  # set on the built config: load_config refuses train.fsdp on CPU
    trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    join(trainer, rank, ranks, address, allow_cpu_fsdp=fsdp and not torch.cuda.is_available())
    metrics = trainer.learn(trajs, 0.0)
    weights = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in _weights(trainer).items()}
    torch.save({"weights": {k: v.cpu() for k, v in weights.items()}, "metrics": metrics}, f"{out_dir}/rank{rank}.pt")
    leave()


def _serve(rank, jobs, done):
    """A learner rank kept for the module: runs each job it is handed (the CPU mode the test set, then
    `_rank`) and reports None or the traceback."""
    import traceback

    while (job := jobs.get()) is not None:
        mode, args = job
        os.environ[CPU_BF16_ENV] = mode
        try:
            _rank(rank, *args)
            done.put(None)
        except BaseException:  # noqa: BLE001  (reported to the test, which fails with it)
            done.put(f"rank {rank}: {traceback.format_exc()}")


@pytest.fixture(scope="module")
def cpu_ranks():
    """Two CPU learner ranks started once for the module instead of two per test, forked from a server
    that has the trainer's imports (tests/forked.py). Every job still joins a fresh gloo group and
    builds its trainer from the job's arguments, the CPU mode included."""
    ctx = forked.context()
    jobs, done = [ctx.Queue() for _ in range(2)], ctx.Queue()
    procs = [ctx.Process(target=_serve, args=(r, jobs[r], done), daemon=True) for r in range(2)]
    for proc in procs:
        proc.start()

    def run(*args) -> None:
        for q in jobs:
            q.put((os.environ.get(CPU_BF16_ENV, ""), args))
        errors = [e for e in (done.get(timeout=600) for _ in procs) if e is not None]
        assert not errors, "\n".join(errors)

    yield run
    for q in jobs:
        q.put(None)
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.kill()


@pytest.fixture(scope="module")
def warm(tiny_model):
    torch.manual_seed(0)
    return _warm_model(tiny_model)


def _run(tmp_path, warm, estimator, ranks=2, fsdp=False, device="cpu", cpu_ranks=None):
    model, tok = warm
    over = _over(tmp_path, estimator)
    if device != "cpu":
        over["train.device"] = device
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank: the same kernels
    try:
        roller = RLTrainer(load_config(None, over), copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
        trajs = roller.rollout()
        before = _weights(roller)
        single, single_metrics = _learn(over, model, tok, trajs)
        batch = single.prepare(trajs)
    finally:
        torch.set_num_threads(threads)
    args = (ranks, free_address(), over, model, tok, trajs, str(tmp_path), fsdp)
    if cpu_ranks is not None and device == "cpu" and ranks == 2:
        cpu_ranks(*args)
    else:  # GPUs (benchmarks/fsdp_check.sh): one process per device, as many as there are
        torch.multiprocessing.spawn(_rank, args=args, nprocs=ranks, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(ranks)]
    return SimpleNamespace(before=before, single={k: v.cpu() for k, v in _weights(single).items()}, single_metrics=single_metrics, ranks=ranks,
                           batch=batch)


# _over pins fp32 for every test here; grpo checks the pin under both CPU modes (gae adds a critic, not
# another precision path, so once is enough: each case is about 13 s)
@pytest.mark.parametrize("estimator,cpu_bf16", [("grpo", "emulated"), ("grpo", "native"), ("gae", "emulated")],
                         indirect=["cpu_bf16"])
def test_two_learners_equal_one(tmp_path, warm, estimator, cpu_bf16, cpu_ranks):
    r = _run(tmp_path, warm, estimator, cpu_ranks=cpu_ranks)
    assert r.batch["advantages"].abs().sum() > 0  # a real update: advantages, not just the entropy bonus
    moved = max(float((r.single[k] - r.before[k]).abs().max()) for k in r.single)
    assert moved > 1e-4  # one learner's weights did change
    assert any(k.startswith("critic.") for k in r.single) == (estimator == "gae")
    for rank in r.ranks:
        assert rank["weights"].keys() == r.single.keys()
        diff = max(float((rank["weights"][k] - r.single[k]).abs().max()) for k in r.single)
        assert diff <= TOL, (estimator, diff)
    # the replicas are the same weights, bit for bit (same summed gradients, same steps)
    assert all(torch.equal(r.ranks[0]["weights"][k], r.ranks[1]["weights"][k]) for k in r.single)
    for key in ("policy_loss", "kl", "grad_norm", *(("value_loss",) if estimator == "gae" else ())):
        assert r.ranks[0]["metrics"][key] == pytest.approx(r.single_metrics[key], abs=TOL), key


@pytest.mark.parametrize("estimator", ["grpo", "gae"] if DEVICE == "cuda" else ["grpo"])
def test_fsdp_shards_equal_one_learner_over_gloo(tmp_path, warm, estimator, cpu_ranks):
    """FSDP2's arithmetic (sharded decoder layers, summed reduce-scatter, global clip) checked where
    there is no GPU: gloo on CPU, a path the config refuses to users (`check_fsdp`) and `join`
    opens only for this check. The GPU run is `bash benchmarks/fsdp_check.sh`."""
    ranks = min(2, torch.cuda.device_count()) if DEVICE == "cuda" else 2
    r = _run(tmp_path, warm, estimator, ranks=ranks, fsdp=True, device=DEVICE, cpu_ranks=cpu_ranks)
    for rank in r.ranks:
        diff = max(float((rank["weights"][k] - r.single[k]).abs().max()) for k in r.single)
        assert diff <= TOL, diff
    assert max(float((r.single[k] - r.before[k]).abs().max()) for k in r.single) > 1e-4
    assert r.ranks[0]["metrics"]["grad_norm"] == pytest.approx(r.single_metrics["grad_norm"], abs=TOL)


def test_fsdp_refused_on_cpu():
    with pytest.raises(ValueError, match=r"train\.fsdp=true .* train\.fsdp: false"):
        check_fsdp(True, torch.device("cpu"))
    check_fsdp(False, torch.device("cpu"))  # replicas over gloo are fine
