"""RL with LoRA adapters (model.lora.r > 0): only adapters train, the reference is the base with
adapters off, and resume equals an uninterrupted run."""

from __future__ import annotations

import copy

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.training.compute import token_logprobs
from agent_r1.training.trainer import RLTrainer
from tests.pipeline_helpers import resume_run_overrides
from tests.precision_modes import FP32, both_cpu_modes
from tests.rollout_helpers import make_env_factory

SAMPLES = [{"id": f"q{i}", "question": f"Where was {n} born?", "answers": ["Telumas"]}
           for i, n in enumerate(["Karivo", "Bamena", "Tolusa"])]


def _cfg(tmp_path, **over):
    base = {"train.out_dir": str(tmp_path / "run"), "train.prompts_per_iter": 3, "rollout.n_samples": 2,
            "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 8, "train.device": "cpu", "train.threads": 1,
            "model.lora.r": 4, "algo.kl_coef": 0.1, "train.lr": 1e-2, "train.micro_batch_size": 2, **FP32}
    base.update(over)
    return load_config(None, base)


@both_cpu_modes
def test_only_adapters_train_and_the_reference_is_the_base(tiny_model, tmp_path):
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    base = copy.deepcopy(model)
    trainer = RLTrainer(_cfg(tmp_path, **{"algo.adv_estimator": "gae"}), model, tok, make_env_factory(), SAMPLES)
    assert trainer.ref_in_policy and trainer.reference is None  # no second copy of the weights
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    critic_before = {n: p.detach().clone() for n, p in trainer.critic.named_parameters()}
    batch = trainer.prepare(trainer.rollout())
    # the reference log-probs are the base model's (adapters off), at the run's temperature
    want, _ = token_logprobs(base, batch["input_ids"], batch["attention_mask"], positions=batch["logp_mask"])
    assert torch.allclose(batch["ref_logp"], want, atol=1e-5)
    batch["advantages"] = batch["action_mask"].clone()
    batch["returns"] = batch["action_mask"].clone()
    for _ in range(2):  # LoRA's B starts at 0: the second step moves A as well
        trainer._step_minibatch(batch, torch.arange(batch["input_ids"].shape[0]), {})
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)}
    assert changed and all("lora_" in n for n in changed)
    assert {n for n in before if "lora_" in n} == changed  # every adapter matrix moved
    critic_changed = {n for n, p in trainer.critic.named_parameters() if not torch.equal(critic_before[n], p)}
    assert critic_changed and all("lora_" in n or n.startswith("head.") for n in critic_changed)
    # and the reference still equals the untouched base
    with trainer._reference() as ref, torch.no_grad():
        again, _ = token_logprobs(ref, batch["input_ids"], batch["attention_mask"], positions=batch["logp_mask"])
    assert torch.allclose(again, want, atol=1e-5)


def test_a_missing_target_module_is_an_error_at_start(tiny_model, tmp_path):
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    cfg = _cfg(tmp_path, **{"model.lora.target_modules": ["c_attn"]})
    with pytest.raises(ValueError, match=r"model\.lora\.target_modules.*c_attn.*q_proj"):
        RLTrainer(cfg, model, tok, make_env_factory(), SAMPLES)


def test_lora_resume_equals_uninterrupted(tmp_path):
    """4 iterations straight == 2, stop, resume to 4: adapters, critic and metrics (real data, index)."""
    from safetensors.torch import load_file

    from agent_r1.runs.run import run_train
    from agent_r1.tracking.metrics import read_metrics

    common = {**resume_run_overrides(tmp_path), "model.lora.r": 4, "train.lr": 1e-2,
              "reward.format_penalty": -1.0, "train.device": "cpu"}
    run_train(load_config(None, {**common, "train.iterations": 4, "train.out_dir": str(tmp_path / "a")}))
    run_train(load_config(None, {**common, "train.iterations": 2, "train.out_dir": str(tmp_path / "b")}))
    result = run_train(load_config(None, {**common, "train.iterations": 4, "train.out_dir": str(tmp_path / "b")}),
                       resume=True)
    assert result["iterations"] == 4
    a = read_metrics(tmp_path / "a" / "metrics.jsonl")
    b = read_metrics(tmp_path / "b" / "metrics.jsonl")
    assert [m["step"] for m in a] == [m["step"] for m in b] == [0, 1, 2, 3, 4]
    for ma, mb in zip(a[1:], b[1:]):
        assert ma["reward_mean"] == mb["reward_mean"] and ma["lr"] == pytest.approx(mb["lr"])
        assert ma["policy_loss"] == pytest.approx(mb["policy_loss"], abs=1e-6)
    ckpt_a, ckpt_b = (tmp_path / x / "checkpoints" / "iter_000004" for x in "ab")
    assert (ckpt_a / "adapter_config.json").exists() and not (ckpt_a / "model.safetensors").exists()
    pa, pb = load_file(ckpt_a / "adapter_model.safetensors"), load_file(ckpt_b / "adapter_model.safetensors")
    assert pa and all(torch.allclose(pa[k], pb[k], atol=1e-6) for k in pa)
    assert any(float(v.abs().sum()) > 0 for k, v in pa.items() if "lora_B" in k), "the adapters never trained"
