"""The RL trainer on a real tiny model: learning on a trivially learnable task, exact resume,
NaN handling, and the mask ablations."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.rollout.chat import ChatCodec
from agent_r1.training.demos import demo_trajectory
from agent_r1.training.sft import sft_train
from agent_r1.training.trainer import NonFiniteLossError, RLTrainer
from tests.pipeline_helpers import resume_run_overrides
from tests.precision_modes import FP32
from tests.rollout_helpers import make_env_factory

NAMES = ["Karivo", "Bamena", "Tolusa", "Meriko", "Dasuna", "Vikelo", "Runoma", "Sebika"]
SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"]} for i, n in enumerate(NAMES)]


def _cfg(tmp_path, **over):
    base = {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 8, "rollout.n_samples": 4,
            "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8, "train.ppo_epochs": 2,
            "train.minibatch_size": 16, "train.lr": 2e-3, "train.eval_every": 0, "train.threads": 1,
            **FP32}  # exact comparisons (here and in the modules that borrow _cfg): fp32 on every CPU
    base.update(over)
    return load_config(None, base)


_WARM: dict[int, tuple] = {}  # per tiny model: the SFT'd weights and torch's RNG state after the SFT


def _warm_model(tiny_model):
    """SFT: half the demos answer Telumas (right), half Orvania (wrong): reward ~0.5 to start. The SFT
    (seeded, so the same every time) runs once per test process and four modules share it; a caller
    gets its own copy, and torch's RNG as the SFT left it, so its rollouts draw what they drew after it."""
    key = id(tiny_model[0])
    if key not in _WARM:
        model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
        make_env = make_env_factory("tag")
        codec = ChatCodec(tok)
        demos = [demo_trajectory(make_env(s), codec, s, [f"<answer>{a}</answer>"], 16)
                 for s in SAMPLES for a in ("Telumas", "Orvania")]
        sft_train(model, tok, demos, steps=60, batch_size=16, lr=1e-2, seed=0)
        _WARM[key] = (model, torch.get_rng_state())
    model, rng = _WARM[key]
    torch.set_rng_state(rng)
    return copy.deepcopy(model), tiny_model[1]


def test_grpo_improves_reward_on_trivial_task(tiny_model, tmp_path):
    torch.manual_seed(0)
    model, tok = _warm_model(tiny_model)
    cfg = _cfg(tmp_path, **{"train.iterations": 12})
    trainer = RLTrainer(cfg, model, tok, make_env_factory("tag"), SAMPLES)
    rewards = [trainer.train_step()["reward_mean"] for _ in range(cfg.train.iterations)]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert 0.1 < first < 0.9, rewards  # the warm start is genuinely uncertain
    assert last > first + 0.2, rewards


@pytest.mark.parametrize("estimator", ["gae", "rloo", "reinforce_pp", "reinforce_pp_baseline", "grpo_no_std"])
def test_each_estimator_runs_an_iteration(tiny_model, tmp_path, estimator):
    model, tok = _warm_model(tiny_model)
    over = {"algo.adv_estimator": estimator, "train.iterations": 1, "algo.kl_coef": 0.01}
    trainer = RLTrainer(_cfg(tmp_path, **over), model, tok, make_env_factory("tag"), SAMPLES)
    m = trainer.train_step()
    assert all(v == v for v in m.values())  # no NaN anywhere
    assert ("value_loss" in m) == (estimator == "gae")
    assert m["kl"] >= 0.0


def test_loss_mask_off_trains_on_observations(tiny_model, tmp_path):
    model, tok = tiny_model
    import copy

    on = RLTrainer(_cfg(tmp_path), copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    trajs = on.rollout()
    assert any(t.observation_ids for tr in trajs for t in tr.turns)
    batch = on.prepare(trajs)
    assert torch.equal(batch["loss_mask"], batch["action_mask"])
    off = RLTrainer(_cfg(tmp_path, **{"algo.loss_mask": False, "algo.advantage_mask": False}),
                    copy.deepcopy(model), tok, make_env_factory("tag"), SAMPLES)
    batch_off = off.prepare(trajs)
    assert batch_off["loss_mask"].sum() > batch_off["action_mask"].sum()
    # with the advantage mask on, observation tokens carry zero advantage
    obs = (batch["response_mask"] - batch["action_mask"]).bool()
    assert torch.all(batch["advantages"][obs] == 0)


def test_non_finite_updates_are_skipped_then_stop(tiny_model, tmp_path):
    model, tok = tiny_model
    import copy

    trainer = RLTrainer(_cfg(tmp_path, **{"train.max_bad_updates": 2}), copy.deepcopy(model), tok,
                        make_env_factory("tag"), SAMPLES)
    batch = trainer.prepare(trainer.rollout())
    before = [p.detach().clone() for p in trainer.model.parameters()]
    batch["advantages"] = torch.full_like(batch["advantages"], float("nan")) * batch["loss_mask"] + float("nan")
    rows = torch.arange(batch["input_ids"].shape[0])
    stats: dict = {}
    trainer._step_minibatch(batch, rows, stats)
    assert trainer.skipped_updates == 1
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))  # weights untouched
    with pytest.raises(NonFiniteLossError, match="consecutive"):
        trainer._step_minibatch(batch, rows, stats)


def test_resume_equals_uninterrupted(tmp_path):
    """Same seed: 4 iterations straight == 2 iterations, stop, resume to 4 (real data and index)."""
    from agent_r1.runs.run import run_train
    from agent_r1.tracking.metrics import read_metrics

    common = resume_run_overrides(tmp_path)
    straight = load_config(None, {**common, "train.iterations": 4, "train.out_dir": str(tmp_path / "a")})
    run_train(straight)
    first = load_config(None, {**common, "train.iterations": 2, "train.out_dir": str(tmp_path / "b")})
    run_train(first)
    second = load_config(None, {**common, "train.iterations": 4, "train.out_dir": str(tmp_path / "b")})
    result = run_train(second, resume=True)
    assert result["iterations"] == 4
    a = read_metrics(tmp_path / "a" / "metrics.jsonl")
    b = read_metrics(tmp_path / "b" / "metrics.jsonl")
    assert [m["step"] for m in a] == [m["step"] for m in b] == [0, 1, 2, 3, 4]  # no step twice, none lost
    for ma, mb in zip(a[1:], b[1:]):
        assert ma["reward_mean"] == mb["reward_mean"] and ma["response_length"] == mb["response_length"]
        assert ma["policy_loss"] == pytest.approx(mb["policy_loss"], abs=1e-6)
    wa = torch.load(tmp_path / "a" / "checkpoints" / "iter_000004" / "state.pt", weights_only=False)
    wb = torch.load(tmp_path / "b" / "checkpoints" / "iter_000004" / "state.pt", weights_only=False)
    assert wa["sampler"] == wb["sampler"]
    from safetensors.torch import load_file

    pa = load_file(tmp_path / "a" / "checkpoints" / "iter_000004" / "model.safetensors")
    pb = load_file(tmp_path / "b" / "checkpoints" / "iter_000004" / "model.safetensors")
    assert all(torch.allclose(pa[k], pb[k], atol=1e-6) for k in pa)
    assert json.loads((tmp_path / "b" / "config.json").read_text())["seed"] == 0


def test_entropy_as_metric_only_keeps_values_and_drops_its_graph(tiny_model):
    from agent_r1.training.compute import token_logprobs

    model, tok = tiny_model
    ids = torch.tensor([tok.encode("Where was Karivo born?", add_special_tokens=False)])
    mask = torch.ones_like(ids)
    logp_a, ent_a = token_logprobs(model, ids, mask, with_entropy=True)
    logp_b, ent_b = token_logprobs(model, ids, mask, with_entropy=True, entropy_grad=False)
    assert ent_a.requires_grad and not ent_b.requires_grad
    assert logp_b.requires_grad  # the policy loss still gets its gradient
    assert torch.allclose(ent_a, ent_b) and torch.allclose(logp_a, logp_b)
