"""A micro experiment for pipeline tests: a 1-layer model, a 60-person world, 5 SFT steps, 2 RL
iterations. Paths are relative to `root` (absolute when root is given as an absolute folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def micro_params(root: str | Path = "") -> dict[str, Any]:
    def at(rel: str) -> str:
        return str(Path(root) / rel) if root else rel

    return {
        "seed": 0,
        "model": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64, "vocab_size": 300},
        "data": {"dir": at("data/synthetic"), "n_people": 60, "question_types": ["one_hop", "bridge"]},
        "search": {"backend": "tantivy", "index_dir": at("data/index"), "k": 2},
        "rollout": {"max_turns": 2, "max_tokens_per_turn": 12, "max_observation_tokens": 32,
                    "max_total_tokens": 256, "n_samples": 2},
        "sft": {"steps": 5, "batch_size": 8, "log_every": 2, "out_dir": at("runs/sft")},
        "train": {"iterations": 2, "prompts_per_iter": 3, "ppo_epochs": 1, "minibatch_size": 8,
                  "checkpoint_every": 1, "eval_every": 1, "eval_size": 4, "log_trajectories_every": 1,
                  "out_dir": at("runs/default"), "init_from": at("runs/sft/model"), "threads": 1,
                  # the shared warm-start store too: never the repository's own runs/ (the flow
                  # registers the fixed SFT folder there by hard links)
                  "runs_dir": at("runs")},
    }


def unpinned_micro(root: Path, **extra: Any) -> dict[str, Any]:
    """The micro experiment as dotted overrides with nothing pinned: each run makes its own folder
    and the warm start goes to the shared store, both under root/runs."""
    flat: dict[str, Any] = {}
    for section, values in micro_params(root).items():
        if isinstance(values, dict):
            flat.update({f"{section}.{k}": v for k, v in values.items()})
        else:
            flat[section] = values
    flat.update({"train.out_dir": "", "sft.out_dir": "", "train.init_from": "sft",
                 "train.runs_dir": str(Path(root) / "runs"), **extra})
    return flat


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def write_micro_params(path: Path, root: str | Path = "") -> Path:
    """The project's params.yaml with the micro values on top (DVC wants every declared key present)."""
    import yaml

    base = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    path.write_text(yaml.safe_dump(_merge(base, micro_params(root)), sort_keys=False))
    return path


def resume_run_overrides(tmp_path: Path) -> dict[str, Any]:
    """A tiny real run (60-person world, 1-layer model, PPO with a critic and KL) whose checkpoints
    come every 2 iterations: for resume-equals-uninterrupted tests."""
    return {"data.dir": str(tmp_path / "data"), "search.index_dir": str(tmp_path / "index"),
            "train.runs_dir": str(tmp_path / "runs"),  # the digest cache too: never the repository's runs/
            "data.n_people": 60, "model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2,
            "model.intermediate_size": 64, "model.vocab_size": 300, "train.prompts_per_iter": 4,
            "rollout.n_samples": 2, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 6,
            "train.checkpoint_every": 2, "train.eval_every": 0, "train.eval_size": 4, "train.threads": 1,
            "algo.adv_estimator": "gae", "algo.kl_coef": 0.01}


def lora_policy(model: Any, seed: int = 0) -> Any:
    """A LoRA copy of `model` whose adapters change its output (peft starts lora_B at 0): for tests
    that a LoRA policy is served merged (tests/rollout/test_engine_choice.py, tests_vllm/)."""
    import copy

    import torch

    from agent_r1.models.lora import LoraConfig, apply_lora

    peft_model = apply_lora(copy.deepcopy(model), LoraConfig(r=4, alpha=8))
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return peft_model
