"""Asynchronous training with bounded staleness: the decoupled-PPO weight against
hand values, the in-process trainer applying it, and a Ray run with `train.max_staleness: 1` whose
rollouts overlap the updates, every batch at most one version stale, every prompt once.

The synchronous path (max_staleness 0) is held by tests/integration/test_ray_trainer.py
(`test_one_worker_equals_in_process`: one worker equals the in-process trainer, bit for bit).
"""

from __future__ import annotations

import copy
import math
from collections import Counter

import pytest
import torch

from agent_r1.algos.losses import ppo_policy_loss
from agent_r1.algos.losses import behaviour_weights, offpolicy_advantages
from agent_r1.config import load_config
from tests.precision_modes import both_cpu_modes

ITERATIONS = 3


def _staleness(cfg, k: int, clip: float | None = None):
    """Sets train.max_staleness (and algo.offpolicy_clip) on a built config: the in-process trainer
    test needs the correction without Ray, which load_config refuses for a user (see below)."""
    cfg.train.max_staleness = k
    if clip is not None:
        cfg.algo.offpolicy_clip = clip
    return cfg


def test_config_checks_staleness_and_the_clip():
    assert load_config(None, {"ray.enabled": True, "train.max_staleness": 1}).train.max_staleness == 1
    with pytest.raises(ValueError, match="ray.enabled=true"):
        load_config(None, {"train.max_staleness": 1})  # in-process training cannot overlap anything
    with pytest.raises(ValueError, match="train.max_staleness"):
        load_config(None, {"ray.enabled": True, "train.max_staleness": -1})
    with pytest.raises(ValueError, match="algo.offpolicy_clip"):
        load_config(None, {"algo.offpolicy_clip": 0})


# --- the math -----------------------------------------------------------------------------------
def test_behaviour_weights_against_hand_values():
    proximal = torch.tensor([[-1.0, -0.5, -2.0, -3.0], [-0.1, 0.0, 0.0, 0.0]])
    behaviour = torch.tensor([[-1.2, -0.5, -0.5, 0.0], [-0.9, 0.0, 0.0, 0.0]])
    sampled = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])  # [0, 3]: an observation token
    w, m = behaviour_weights(proximal, behaviour, sampled, clip=1.5)
    # by hand: exp(0.2) = 1.2214, exp(0) = 1, exp(-1.5) = 0.2231, exp(0.8) = 2.2255 -> truncated to 1.5
    expected = torch.tensor([[1.221403, 1.0, 0.223130, 1.0], [1.5, 1.0, 1.0, 1.0]])
    assert torch.allclose(w, expected, atol=1e-6)
    assert m["offpolicy/weight_mean"] == pytest.approx((1.221403 + 1.0 + 0.223130 + 1.5) / 4, abs=1e-6)
    assert m["offpolicy/weight_max"] == pytest.approx(math.exp(0.8), abs=1e-5)
    assert m["offpolicy/truncated_frac"] == pytest.approx(0.25)
    assert m["offpolicy/behaviour_kl"] == pytest.approx((0.2 + 0.0 - 1.5 + 0.8) / 4, abs=1e-6)
    with pytest.raises(ValueError, match="offpolicy_clip"):
        behaviour_weights(proximal, behaviour, sampled, clip=0.0)


def test_weighted_advantages_equal_the_weighted_clipped_objective():
    """w * A into the unchanged PPO loss == w times the clipped per-token objective (dual clip too),
    and no gradient flows through w."""
    torch.manual_seed(0)
    old = torch.randn(3, 5)
    new = (old + 0.3 * torch.randn(3, 5)).requires_grad_(True)
    adv = torch.randn(3, 5)
    mask = (torch.rand(3, 5) > 0.2).float()
    behaviour = (old + 0.4 * torch.randn(3, 5)).requires_grad_(True)
    w, _ = behaviour_weights(old, behaviour, mask, clip=2.0)
    assert not w.requires_grad
    loss, _ = ppo_policy_loss(new, old, offpolicy_advantages(adv, w), mask, clip_low=0.2, clip_high=0.28,
                              dual_clip=3.0)
    ratio = torch.exp(new - old)
    per_token = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.28))
    per_token = torch.where(adv < 0, torch.minimum(per_token, -adv * 3.0), per_token)
    by_hand = (w * per_token * mask).sum() / mask.sum()
    assert float(loss.detach()) == pytest.approx(float(by_hand.detach()), abs=1e-6)
    assert offpolicy_advantages(adv, None) is adv  # synchronous: the advantages themselves


# --- the in-process trainer ---------------------------------------------------------------------
@both_cpu_modes  # trainer_config pins fp32
def test_trainer_weights_the_policy_loss_by_the_behaviour_ratio(tiny_model, tmp_path):
    from agent_r1.training.trainer import RLTrainer
    from tests.rollout_helpers import QA_SAMPLES, make_env_factory, trainer_config

    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    sync = RLTrainer(trainer_config(tmp_path), model, tok, make_env_factory(), QA_SAMPLES)
    trajs = sync.rollout()
    batch = sync.prepare(trajs)
    assert "offpolicy_weight" not in batch and "offpolicy/weight_mean" not in sync._metrics(trajs, batch, {}, 1, 1)
    idx = torch.arange(batch["input_ids"].shape[0])
    # advantages of tiny untrained models are often all 0 (equal rewards in a group): fix some
    advantages = torch.randn(batch["advantages"].shape, generator=torch.Generator().manual_seed(0))
    batch["advantages"] = advantages * batch["action_mask"]
    sync_loss = sync._backward_minibatch(batch, idx)[0]["policy_loss"]

    async_trainer = copy.copy(sync)
    async_trainer.cfg = _staleness(copy.deepcopy(sync.cfg), 1, clip=2.0)
    stale = copy.deepcopy(trajs)
    for t in stale:  # a behaviour policy that found every sampled token 0.5 nat less likely
        for turn in t.turns:
            turn.action_logprobs = [lp - 0.5 for lp in turn.action_logprobs]
    stale_batch = async_trainer.prepare(stale)
    stale_batch["advantages"] = batch["advantages"]
    act = stale_batch["action_mask"] > 0
    w = stale_batch["offpolicy_weight"]
    assert torch.allclose(w[act], torch.full_like(w[act], math.exp(0.5)), atol=2e-4)  # engine == trainer to 1e-4
    assert bool((w[~act] == 1.0).all())
    metrics = async_trainer._metrics(stale, stale_batch, {}, 1, 1)
    assert metrics["offpolicy/weight_mean"] == pytest.approx(math.exp(0.5), abs=2e-4)
    assert metrics["offpolicy/truncated_frac"] == 0.0
    # a uniform weight scales the token-mean loss by exactly that weight
    stale_loss = async_trainer._backward_minibatch(stale_batch, idx)[0]["policy_loss"]
    assert abs(sync_loss) > 1e-6
    assert stale_loss == pytest.approx(math.exp(0.5) * sync_loss, rel=1e-3)


# --- a Ray run with max_staleness 1 ----------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from agent_r1.runs.run import Run

    root = tmp_path_factory.mktemp("async_world")
    Run(_cfg(root, "prep")).index_dir
    return root


def _cfg(root, name, **over):
    base = {"data.dir": str(root / "data"), "search.index_dir": str(root / "index"), "data.n_people": 60,
            "train.runs_dir": str(root / "runs"),  # its digest cache too: never the repository's runs/
            "model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64,
            "model.vocab_size": 300, "train.prompts_per_iter": 4, "rollout.n_samples": 2, "rollout.max_turns": 2,
            "rollout.max_tokens_per_turn": 6, "train.eval_every": 0, "train.eval_size": 4, "train.threads": 1,
            "train.iterations": ITERATIONS, "train.checkpoint_every": ITERATIONS, "algo.adv_estimator": "grpo",
            "train.out_dir": str(root / name), "ray.cpus_per_worker": 1, "ray.learner_cpus": 1,
            "ray.num_workers": 2}
    base.update(over)
    return load_config(None, base)


@pytest.fixture(scope="module")
def async_run(ray_session, world):
    from agent_r1.runs.run import Run
    from agent_r1.training import checkpoint as ckpt
    from agent_r1.training.ray_trainer import RayTrainer

    # a user's config (validated again where the actors rebuild it from the run's spec)
    cfg = _cfg(world, "async", **{"ray.enabled": True, "train.max_staleness": 1})
    with RayTrainer(Run(cfg).spec()) as trainer:
        steps = []
        for i in range(ITERATIONS):
            metrics = trainer.train_step()
            steps.append((metrics, trainer.last_trajectories, list(trainer.last_shard_nodes)))
            if i == 1:  # iteration 2's rollout is in flight: the checkpoint must leave it out
                in_flight = [job.iteration for job in trainer._in_flight]
                saved = ckpt.load_state(trainer.save())
        return cfg, steps, trainer.learn_log, in_flight, saved, len(trainer._in_flight)


def test_async_batches_are_at_most_one_version_stale(async_run):
    _, steps, learn_log, *_ = async_run
    assert [e["iteration"] for e in learn_log] == list(range(ITERATIONS))
    for (metrics, trajs, _), entry in zip(steps, learn_log):
        staleness = entry["learned_at"] - entry["sampled_by"]
        assert 0 <= staleness <= 1
        assert {t.policy_version for t in trajs} == {entry["sampled_by"]}  # each trajectory knows its sampler
        assert metrics["staleness/max"] == staleness and metrics["staleness/mean"] == staleness
        assert metrics["offpolicy/weight_mean"] > 0 and math.isfinite(metrics["policy_loss"])
        assert 0.0 <= metrics["offpolicy/truncated_frac"] <= 1.0
    # iteration 0 has nothing to overlap with; every later batch was submitted before the previous update
    assert [e["learned_at"] - e["sampled_by"] for e in learn_log] == [0] + [1] * (ITERATIONS - 1)


def test_async_rollouts_overlap_the_updates(async_run):
    """Iteration i+1's shards ran while the learner updated on iteration i (wall clock of the
    worker processes against the update's window, one machine)."""
    _, steps, learn_log, *_ = async_run
    overlapped = 0
    for i in range(ITERATIONS - 1):
        window = learn_log[i]
        shards = steps[i + 1][2]
        assert all(s["version"] == window["learned_at"] for s in shards)  # submitted before update i
        overlapped += any(s["started"] < window["finished"] and s["finished"] > window["started"] for s in shards)
    assert overlapped >= 1


def test_async_rolls_out_every_prompt_once_per_iteration(async_run, world):
    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import PromptSampler

    cfg, steps, *_, left = async_run
    sampler = PromptSampler(Run(cfg).samples("train"), cfg.seed)
    for metrics, trajs, _ in steps:
        prompts = [str(s["id"]) for s in sampler.next_batch(cfg.train.prompts_per_iter)]
        assert [t.sample_id for t in trajs][::cfg.rollout.n_samples] == prompts  # the synchronous order
        assert Counter(t.sample_id for t in trajs) == {p: cfg.rollout.n_samples for p in prompts}
    assert left == 0  # nothing is rolled out past train.iterations


def test_checkpoint_leaves_in_flight_batches_out(async_run, world):
    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import PromptSampler

    cfg, _, _, in_flight, saved, _ = async_run
    assert in_flight == [2] and saved["iteration"] == 2
    sampler = PromptSampler(Run(cfg).samples("train"), cfg.seed)
    for _ in range(2):
        sampler.next_batch(cfg.train.prompts_per_iter)
    assert saved["sampler"] == sampler.state_dict()  # a resume draws iteration 2's prompts again
