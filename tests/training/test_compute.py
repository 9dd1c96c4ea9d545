"""Device, precision, micro-batches and memory-bounded log-probs (agent_r1/training/compute.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.algos import entropy_from_logits
from agent_r1.config import load_config
from agent_r1.training.compute import Compute, resolve_device, token_logprobs
from agent_r1.algos.schedules import lr_factor
from agent_r1.training.trainer import RLTrainer
from tests.rollout_helpers import QA_SAMPLES, make_env_factory, trainer_config

SAMPLES = QA_SAMPLES


def _cfg(tmp_path, **over):
    return trainer_config(tmp_path, **{"rollout.max_turns": 2, "rollout.max_tokens_per_turn": 10,
                                       "rollout.temperature": 0.8, **over})


def _full_logprobs(model, ids, att, temperature):
    logits = model(input_ids=ids, attention_mask=att.long()).logits[:, :-1].float() / temperature
    lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    ent = entropy_from_logits(logits)
    pad = torch.zeros_like(lp[:, :1])
    return torch.cat([pad, lp], 1) * att, torch.cat([pad, ent], 1) * att


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_chunked_logprobs_equal_a_full_softmax(tiny_model, chunk):
    model = tiny_model[0]
    torch.manual_seed(0)
    ids = torch.randint(5, 300, (3, 17))
    att = torch.ones(3, 17)
    att[1, 11:] = 0
    want_lp, want_ent = _full_logprobs(model, ids, att, 0.7)
    lp, ent = token_logprobs(model, ids, att, temperature=0.7, with_entropy=True, chunk=chunk)
    assert torch.allclose(lp, want_lp, atol=1e-5) and torch.allclose(ent, want_ent, atol=1e-4)
    # only the positions asked for are computed; the rest are exactly 0
    positions = torch.zeros_like(att)
    positions[:, 5:9] = 1
    lp, _ = token_logprobs(model, ids, att, temperature=0.7, positions=positions, chunk=chunk)
    assert torch.allclose(lp, want_lp * positions, atol=1e-5)
    assert torch.all(lp[positions == 0] == 0)


def test_chunked_logprob_gradients_equal_a_full_softmax(tiny_model):
    model = copy.deepcopy(tiny_model[0])
    ids = torch.randint(5, 300, (2, 13))
    att = torch.ones(2, 13)
    grads = []
    for chunked in (True, False):
        model.zero_grad()
        if chunked:
            lp, ent = token_logprobs(model, ids, att, temperature=1.3, with_entropy=True, chunk=5)
        else:
            lp, ent = _full_logprobs(model, ids, att, 1.3)
        (lp.sum() + 0.1 * ent.sum()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_micro_batches_give_the_one_shot_gradient(tiny_model, tmp_path, agg):
    # float64, so the comparison sees the normalisation, not float32 summation order
    model, tok = copy.deepcopy(tiny_model[0]).double(), tiny_model[1]
    grads = {}
    batch = None
    for micro in (0, 1, 3):
        cfg = _cfg(tmp_path, **{"algo.loss_agg": agg, "train.micro_batch_size": micro, "algo.kl_coef": 0.1,
                                "algo.entropy_coef": 0.01})
        trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(), SAMPLES)
        batch = batch if batch is not None else trainer.prepare(trainer.rollout())
        trainer.optimizer.zero_grad(set_to_none=True)
        rows = torch.arange(batch["input_ids"].shape[0])
        assert trainer._backward_minibatch(batch, rows)[0] is not None
        grads[micro] = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    assert int(batch["action_mask"].sum()) > 0 and len(set(batch["action_mask"].sum(-1).tolist())) > 1
    for micro in (1, 3):
        rel = (grads[micro] - grads[0]).norm() / grads[0].norm()
        assert rel < 1e-5, (micro, float(rel))


def test_bf16_updates_float32_master_weights(tiny_model, tmp_path):
    """Fails when AdamW steps bf16 weights: 10 steps at lr 1e-6 changed none of them."""
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    model.to(torch.bfloat16)  # as loaded with model.dtype: bfloat16
    cfg = _cfg(tmp_path, **{"train.precision": "bf16", "train.lr": 1e-6, "train.minibatch_size": 4})
    trainer = RLTrainer(cfg, model, tok, make_env_factory(), SAMPLES)
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters() if p.requires_grad)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    batch = trainer.prepare(trainer.rollout())
    batch["advantages"] = batch["action_mask"].clone()  # a non-zero signal on every action token
    for _ in range(10):
        trainer._step_minibatch(batch, torch.arange(batch["input_ids"].shape[0]), {})
    changed = sum(int((a != b).sum()) for a, b in zip(before, trainer.model.parameters()))
    assert changed > 0.5 * sum(p.numel() for p in before)


def test_gae_runs_in_bf16(tiny_model, tmp_path):
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    cfg = _cfg(tmp_path, **{"train.precision": "bf16", "algo.adv_estimator": "gae"})
    trainer = RLTrainer(cfg, model, tok, make_env_factory(), SAMPLES)
    metrics = trainer.train_step()
    assert "value_loss" in metrics and torch.isfinite(torch.tensor(metrics["value_loss"]))


def test_gradient_checkpointing_keeps_the_gradient(tiny_model, tmp_path):
    model, tok = tiny_model
    grads = []
    batch = None
    for ckpt in (False, True):
        cfg = _cfg(tmp_path, **{"model.gradient_checkpointing": ckpt})
        trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(), SAMPLES)
        batch = batch if batch is not None else trainer.prepare(trainer.rollout())
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer._backward_minibatch(batch, torch.arange(batch["input_ids"].shape[0]))
        grads.append(torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-7)


def test_device_errors_name_the_key(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    for bad in ("cuda", "cuda:1"):
        with pytest.raises(ValueError, match=r"train\.device='cuda.*no CUDA device"):
            resolve_device(bad)
    with pytest.raises(ValueError, match=r"train\.device='gpu'.*auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")


def test_precision_typo_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"train\.precision='fp16'"):
        Compute.from_config(_cfg(tmp_path, **{"train.precision": "fp16"}))


@pytest.mark.parametrize("schedule,expect", [("constant", [0.5, 1.0, 1.0, 1.0]), ("linear", [0.5, 1.0, 2 / 3, 1 / 3]),
                                             ("cosine", [0.5, 1.0, 0.75, 0.25])])
def test_lr_schedules(schedule, expect):
    got = [lr_factor(i, 4, 1, schedule) for i in range(4)]
    assert got == pytest.approx(expect)


def test_lr_schedule_steps_per_iteration_and_resumes(tiny_model, tmp_path):
    model, tok = tiny_model
    cfg = _cfg(tmp_path, **{"train.lr_schedule": "linear", "train.iterations": 4, "train.warmup_iterations": 1})
    trainer = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(), SAMPLES)
    lrs = [trainer.train_step()["lr"] for _ in range(2)]
    assert lrs == pytest.approx([0.5e-3, 1e-3])
    state = trainer.state_dict()
    again = RLTrainer(cfg, copy.deepcopy(model), tok, make_env_factory(), SAMPLES)
    again.optimizer.load_state_dict(state["optimizer"])
    again.scheduler.load_state_dict(state["scheduler"])
    again.iteration = 2
    assert again.train_step()["lr"] == pytest.approx(1e-3 * 2 / 3)  # iteration 2 of the linear decay


@pytest.mark.parametrize("key,value,match", [
    ("train.micro_batch_size", 65, r"train\.micro_batch_size=65 is larger than train\.minibatch_size=64"),
    ("train.precision", "fp16", r"train\.precision='fp16'; choose one of \['auto', 'bf16', 'fp32'\]"),
    ("train.lr_schedule", "step", r"train\.lr_schedule='step'; choose one of"),
])
def test_bad_compute_settings_fail_at_load(key, value, match):
    with pytest.raises(ValueError, match=match):
        load_config(None, {"train.minibatch_size": 64, key: value})


def test_skipped_updates_survive_a_resume(tiny_model, tmp_path):
    model, tok = tiny_model
    trainer = RLTrainer(_cfg(tmp_path), copy.deepcopy(model), tok, make_env_factory(), SAMPLES)
    trainer.skipped_updates = 3
    path = trainer.save()
    again = RLTrainer(_cfg(tmp_path), copy.deepcopy(model), tok, make_env_factory(), SAMPLES)
    again.load(path)
    assert again.skipped_updates == 3


def test_critic_head_is_float32_over_a_bf16_base(tiny_model, tmp_path):
    """A bf16-loaded base with LoRA: the critic's trainable head must still be float32."""
    model, tok = copy.deepcopy(tiny_model[0]).to(torch.bfloat16), tiny_model[1]
    cfg = _cfg(tmp_path, **{"train.precision": "bf16", "algo.adv_estimator": "gae", "model.lora.r": 4})
    trainer = RLTrainer(cfg, model, tok, make_env_factory(), SAMPLES)
    assert all(p.dtype == torch.float32 for p in trainer.critic.parameters() if p.requires_grad)
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters() if p.requires_grad)
    assert "value_loss" in trainer.train_step()
