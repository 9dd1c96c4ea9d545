"""Learner ranks that would run different numbers of forward/backward passes.

With FSDP2 every micro-batch's forward all-gathers and every backward reduce-scatters, so a rank
with one micro-batch more than another waits in a collective the other never enters: a hang (on
NCCL, until the watchdog kills the job). Each case here gives the two ranks unequal work, runs one
`learn` on two gloo ranks, and must (a) finish within the deadline and (b) end with the weights of
one learner on the same batch (within 1e-5):

- 5 rows, micro-batch 0 (shares 3 / 2 rows, one pass each) and micro-batch 1 (3 vs 2 passes);
- GRPO 2 groups x 3 rows with `algo.skip_zero_advantage`, rewards (1,0,0 / 0,0,0): 2 vs 1 trained rows;
- a row with no loss token (every action masked): that rank's micro-batch has no graph;
- a non-finite loss on one rank only (an infinite reward in the second group): every rank skips the
  step, and where that stops the run (`train.max_bad_updates: 1`) every rank raises;
- the 3-vs-2 case on plain replicas (no FSDP).

All cases run in one pair of ranks (one process group, forked: tests/forked.py), so the check costs one start-up.
The ranks are killed at the deadline: a hang fails the test, naming the cases that finished.
"""

from __future__ import annotations

import copy
import os
import time

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.training.distributed import free_address, join, leave
from agent_r1.training.trainer import NonFiniteLossError, RLTrainer
from tests import forked
from tests.precision_modes import FP32, both_cpu_modes
from tests.rollout_helpers import make_env_factory
from tests.training.test_trainer import SAMPLES

TOL = 1e-5
DEADLINE_S = 240  # the cases take a few seconds each; only a hang reaches this

BASE = {"rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8, "train.ppo_epochs": 1, "train.lr": 1e-3,
        "train.eval_every": 0, "train.threads": 1, "algo.adv_estimator": "grpo", "algo.kl_coef": 0.0,
        "train.minibatch_size": 64, **FP32}

# name: (config overrides, fsdp, rows taken from the 2x3 rollout, outcome rewards, masked rows)
CASES = {
    "5rows_mb0": ({"train.micro_batch_size": 0, "algo.entropy_coef": 0.01}, True, 5, (1, 0, 0, 1, 0), ()),
    "5rows_mb1": ({"train.micro_batch_size": 1, "algo.entropy_coef": 0.01}, True, 5, (1, 0, 0, 1, 0), ()),
    "skip_zero_adv": ({"train.micro_batch_size": 1, "algo.skip_zero_advantage": True}, True, 6,
                      (1, 0, 0, 0, 0, 0), ()),
    "no_loss_tokens": ({"train.micro_batch_size": 1, "algo.entropy_coef": 0.01}, True, 6,
                       (1, 0, 0, 1, 0, 1), (5,)),
    "nonfinite_one_rank": ({"train.micro_batch_size": 1}, True, 6, (1, 0, 0, float("inf"), 0, 1), ()),
    "replicas_5rows_mb1": ({"train.micro_batch_size": 1, "algo.entropy_coef": 0.01}, False, 5,
                           (1, 0, 0, 1, 0), ()),
    # the run stops at the first non-finite update: every rank raises, after every collective
    "nonfinite_stops_the_run": ({"train.micro_batch_size": 1, "train.max_bad_updates": 1}, True, 6,
                                (1, 0, 0, float("inf"), 0, 1), ()),
}


def _trajs(base, rows, rewards, masked):
    out = copy.deepcopy(base[:rows])
    for t, r in zip(out, rewards):
        t.outcome_reward = r
    for i in masked:  # a row whose every action is masked: no loss token, no log-prob position
        for turn in out[i].turns:
            turn.masked = True
    return out


def _over(tmp_path, name, device="cpu"):
    return {**BASE, **CASES[name][0], "train.out_dir": str(tmp_path / name), "train.device": device}


def _weights(trainer):
    return {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu().clone()
            for k, v in trainer.model.state_dict().items()}


def _rank(rank, ranks, address, tmp_path, model, tok, base, device):
    """One learner rank: every case in order in one process group, a result file per finished case."""
    torch.set_num_threads(1)
    if device == "cuda":  # NCCL: one GPU per rank
        device = f"cuda:{rank}"
        torch.cuda.set_device(rank)
    for name, (_, fsdp, rows, rewards, masked) in CASES.items():
        cfg = load_config(None, _over(tmp_path, name, device))
        cfg.train.fsdp = fsdp  # set on the built config: load_config refuses train.fsdp on CPU
        trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
        join(trainer, rank, ranks, address, allow_cpu_fsdp=fsdp and device == "cpu")
        try:
            metrics = trainer.learn(_trajs(base, rows, rewards, masked), 0.0)
        except NonFiniteLossError as err:
            metrics = {"raised": str(err)}
        torch.save({"weights": _weights(trainer), "metrics": metrics}, tmp_path / f"{name}.rank{rank}.pt")
    leave()


def _spawn_with_deadline(args, deadline_s):
    """Both ranks, killed at the deadline; returns whether they finished in time."""
    forked.context()  # the server's imports, set before it starts
    # the ranks run under the test's environment (its CPU mode), not the fork server's
    ctx = torch.multiprocessing.start_processes(forked.with_environment(_rank), args=args, nprocs=2, join=False,
                                                start_method=forked.START_METHOD)
    end = time.monotonic() + deadline_s
    try:
        while not ctx.join(timeout=max(end - time.monotonic(), 0.1)):
            if time.monotonic() >= end:
                return False
        return True
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)


def rollout_groups(model, tok, out_dir):
    """One rollout of 2 prompts x 3 samples (two groups of 3); the rewards are set per case."""
    over = {**BASE, "train.out_dir": str(out_dir), "train.prompts_per_iter": 2, "rollout.n_samples": 3,
            "train.device": "cpu"}
    trajs = RLTrainer(load_config(None, over), copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES).rollout()
    ids = [t.sample_id for t in trajs]
    assert ids[:3] == [ids[0]] * 3 and ids[3:] == [ids[3]] * 3 and ids[0] != ids[3]  # two groups of 3
    return trajs


def check_uneven_ranks(tmp_path, model, tok, base, device="cpu"):
    """Every case on 2 ranks under the deadline, against one learner on the same device: raises
    AssertionError naming the case; returns {case: max |weight diff| over the ranks}. Also run by
    benchmarks/fsdp_check.sh over NCCL."""
    finished = _spawn_with_deadline((2, free_address(), tmp_path, model, tok, base, device), DEADLINE_S)
    done = [n for n in CASES if all((tmp_path / f"{n}.rank{r}.pt").exists() for r in (0, 1))]
    assert finished and done == list(CASES), f"ranks hung after {DEADLINE_S} s; finished cases: {done}"
    diffs = {}
    for name, (_, _, rows, rewards, masked) in CASES.items():
        trainer = RLTrainer(load_config(None, _over(tmp_path, name, device)), copy.deepcopy(model), tok,
                            make_env_factory("tag"), SAMPLES)
        before = _weights(trainer)
        if name == "nonfinite_stops_the_run":
            with pytest.raises(NonFiniteLossError):
                trainer.learn(_trajs(base, rows, rewards, masked), 0.0)
            for r in (0, 1):
                got = torch.load(tmp_path / f"{name}.rank{r}.pt")
                assert "consecutive" in got["metrics"].get("raised", ""), (name, r)
                assert all(torch.equal(got["weights"][k], before[k]) for k in before), (name, r)
            diffs[name] = 0.0
            continue
        single = trainer.learn(_trajs(base, rows, rewards, masked), 0.0)
        one = _weights(trainer)
        moved = max(float((one[k] - before[k]).abs().max()) for k in one)
        if name == "nonfinite_one_rank":  # one learner skips the step: so does every rank
            assert moved == 0.0 and single["skipped_updates"] == 1.0, name
        else:
            assert moved > 1e-4, name
        diffs[name] = 0.0
        for r in (0, 1):
            got = torch.load(tmp_path / f"{name}.rank{r}.pt")
            diff = max(float((got["weights"][k] - one[k]).abs().max()) for k in one)
            diffs[name] = max(diffs[name], diff)
            assert diff <= TOL, (name, r, diff)
            assert got["metrics"]["skipped_updates"] == single["skipped_updates"], name
            if "policy_loss" in single:
                assert got["metrics"]["policy_loss"] == pytest.approx(single["policy_loss"], abs=TOL), name
    return diffs


@pytest.fixture(scope="module")
def rolled(tiny_model, tmp_path_factory):
    model, tok = tiny_model
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return model, tok, rollout_groups(model, tok, tmp_path_factory.mktemp("roll"))
    finally:
        torch.set_num_threads(threads)


@both_cpu_modes
def test_uneven_ranks_finish_and_equal_one_learner(tmp_path, rolled, record_property):
    model, tok, base = rolled
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank: the same kernels
    try:
        # benchmarks/fsdp_check.sh runs this on 2 GPUs over NCCL (AGENT_R1_TEST_DEVICE=cuda)
        diffs = check_uneven_ranks(tmp_path, model, tok, base, os.environ.get("AGENT_R1_TEST_DEVICE", "cpu"))
    finally:
        torch.set_num_threads(threads)
    record_property("max_diff", max(diffs.values()))
    assert diffs.keys() == CASES.keys()
