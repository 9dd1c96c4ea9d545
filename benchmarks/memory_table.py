"""GPU memory each paper preset needs, COMPUTED (not measured on a GPU) from the per-token memory
that benchmarks/memory.py measured on the CPU, plus parameter counts of Qwen2.5-1.5B / 3B / 7B.

Learner peak on one GPU = weights and optimiser state + activations of one micro-batch + the output
head's log-prob chunk + a flat allowance for the CUDA context and allocator slack:

- full fine-tuning: 16 bytes/parameter (float32 weights, gradients, AdamW m and v); the KL reference
  a float32 copy (4 bytes/parameter: the policy's master dtype, so both compute alike under autocast
  and KL is exactly 0 at step 0); PPO's critic a full copy of the decoder at 16 bytes/parameter.
- LoRA (r=16 on the 7 linear layers of every block): the frozen base in bf16 (2 bytes/parameter),
  adapters at 16 bytes/parameter; the reference is the base with adapters off (no copy); PPO's
  critic a frozen bf16 copy of the decoder with its own adapter (as agent_r1/training/compute.py).
- activations: the decoder's forward + backward measured at hidden 512 with 4 and 8 layers (Qwen2.5's
  MLP ratio; bf16 autocast, with and without gradient checkpointing): bytes per token per hidden
  unit for each layer and for what does not grow with depth, scaled to the model's width and depth,
  times the micro-batch's tokens (micro_batch_size x rollout.max_total_tokens, the worst case: a
  micro-batch is cut to its longest row). With checkpointing a layer keeps only its float32 input
  (4 bytes per hidden unit), below what RSS resolves; the table uses 4.
- output head: the measured update memory of the `head` model (hidden 64, where the 151,936-word
  vocabulary is nearly all of it) less its parameters' gradients and AdamW state: the log-prob
  chunk over the vocabulary, the same on any model with this vocabulary and chunk size.
- the rollout's KV cache is a separate column: the transformers engine generates every trajectory
  of the iteration in one batch, so at the preset's sizes it needs 2 x layers x KV width x 2 bytes
  per token for prompts_per_iter x n_samples trajectories of up to max_total_tokens.

    .venv/bin/python -m benchmarks.memory_table         # the computed GPU table of docs/real-models.md
    .venv/bin/python -m benchmarks.memory_table --cpu   # the measured CPU table (benchmarks/results/memory.json)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT

MEMORY_JSON = ROOT / "benchmarks" / "results" / "memory.json"  # the committed measurements

GIB = 2**30
CUDA_SLACK_GIB = 1.5  # CUDA context (~0.5 GiB) and caching-allocator fragmentation: an allowance, not a measurement
LORA_R = 16

#: Qwen2.5 shapes from their config.json files (all: 151,936 vocabulary, head_dim 128)
QWEN25 = {
    "Qwen2.5-1.5B": {"hidden": 1536, "layers": 28, "heads": 12, "kv_heads": 2, "inter": 8960, "tied": True},
    "Qwen2.5-3B": {"hidden": 2048, "layers": 36, "heads": 16, "kv_heads": 2, "inter": 11008, "tied": True},
    "Qwen2.5-7B": {"hidden": 3584, "layers": 28, "heads": 28, "kv_heads": 4, "inter": 18944, "tied": False},
}
VOCAB = 151_936
MEASURED_BODY = {"hidden": 512, "layers": 4}  # benchmarks/memory.py MODELS["body"]


def params(m: dict[str, Any]) -> dict[str, int]:
    """Parameter counts: total, decoder body (what the critic copies), LoRA adapters at r=16."""
    h, inter, kv = m["hidden"], m["inter"], m["kv_heads"] * m["hidden"] // m["heads"]
    per_layer = 2 * h * h + 2 * h * kv + h + 2 * kv + 3 * h * inter + 2 * h  # attention (+ qkv biases), MLP, norms
    body = VOCAB * h + m["layers"] * per_layer + h
    total = body + (0 if m["tied"] else VOCAB * h)
    # LoRA A (in x r) and B (r x out) on q, k, v, o, gate, up, down
    lora = LORA_R * m["layers"] * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h))
    return {"total": total, "body": body, "lora": lora}


def activation_bytes(m: dict[str, Any], tokens: int, ckpt: bool, derived: dict[str, Any]) -> float:
    """Activations of one micro-batch of `tokens` tokens: a part per layer and a part that does not
    grow with depth, both per token per hidden unit, measured at 4 and 8 layers (hidden 512)."""
    tag = "_ckpt" if ckpt else ""
    per_layer = derived[f"activation_bytes_per_token_layer_hidden_bf16{tag}"]
    if ckpt:  # each layer keeps its float32 input (4 bytes), below what RSS can resolve on the CPU
        per_layer = max(per_layer, 4.0)
    fixed = derived[f"activation_bytes_per_token_hidden_fixed_bf16{tag}"]
    return tokens * m["hidden"] * (per_layer * m["layers"] + fixed)


def head_bytes(results: dict[str, Any]) -> float:
    r = results["update/rows8_micro4_bf16"]
    return r["update_share_mib"] * 2**20 - 12 * r["parameters"]  # less fp32 gradients + AdamW m, v


def learner_gib(m: dict[str, Any], cfg: Any, lora: bool, derived: dict[str, Any], head: float) -> float:
    p = params(m)
    from agent_r1.algos import ADV_ESTIMATORS

    critic = ADV_ESTIMATORS.traits(cfg.algo.adv_estimator).critic  # the estimator's own trait, not its name
    if lora:
        static = 2 * p["total"] + 16 * p["lora"] + (2 * p["body"] + 16 * p["lora"] + 4 * m["hidden"] if critic else 0)
    else:
        static = 16 * p["total"] + (4 * p["total"] if cfg.algo.kl_coef > 0 else 0) + (16 * p["body"] if critic else 0)
    tokens = cfg.train.micro_batch_size * cfg.rollout.max_total_tokens
    act = activation_bytes(m, tokens, cfg.model.gradient_checkpointing, derived)
    return (static + act + head) / GIB + CUDA_SLACK_GIB


def kv_cache_gib(m: dict[str, Any], cfg: Any) -> float:
    kv = m["kv_heads"] * m["hidden"] // m["heads"]
    trajectories = cfg.train.prompts_per_iter * cfg.rollout.n_samples
    return 2 * m["layers"] * kv * 2 * trajectories * cfg.rollout.max_total_tokens / GIB


def table(memory_json: Path = MEMORY_JSON) -> str:
    from agent_r1.config import load_config

    doc = json.loads(Path(memory_json).read_text())
    derived, head = doc["derived"], head_bytes(doc["results"])
    groups = {"GRPO / RLOO / REINFORCE++-baseline (n=5)": "grpo", "REINFORCE++ (n=1)": "reinforce_pp",
              "PPO + critic, and its two ablations": "ppo"}
    lines = ["| model | preset | learner, full fine-tuning | learner, LoRA r=16 | rollout KV cache, whole batch |",
             "|---|---|---:|---:|---:|"]
    for name, m in QWEN25.items():
        for label, preset in groups.items():
            cfg = load_config(ROOT / "configs" / "paper" / f"{preset}.yaml")
            lines.append(f"| {name} ({params(m)['total'] / 1e9:.2f}B) | {label} | "
                         f"{learner_gib(m, cfg, False, derived, head):.0f} GiB | "
                         f"{learner_gib(m, cfg, True, derived, head):.0f} GiB | {kv_cache_gib(m, cfg):.0f} GiB |")
    cfg = load_config(ROOT / "configs" / "paper" / "grpo.yaml")
    notes = [f"micro-batch {cfg.train.micro_batch_size} x {cfg.rollout.max_total_tokens} tokens, bf16, gradient "
             f"checkpointing {'on' if cfg.model.gradient_checkpointing else 'off'}; output-head chunk "
             f"{head / GIB:.2f} GiB; activations per token and hidden unit: "
             f"{max(derived['activation_bytes_per_token_layer_hidden_bf16_ckpt'], 4.0)} bytes per layer + "
             f"{derived['activation_bytes_per_token_hidden_fixed_bf16_ckpt']} (checkpointing; "
             f"{derived['activation_bytes_per_token_layer_hidden_bf16']} per layer + "
             f"{derived['activation_bytes_per_token_hidden_fixed_bf16']} without), measured as CPU RSS; "
             f"+{CUDA_SLACK_GIB} GiB CUDA context and allocator slack."]
    return "\n".join(lines + [""] + notes)


def cpu_table(memory_json: Path = MEMORY_JSON) -> str:
    """The measured configurations of benchmarks/results/memory.json as a markdown table."""
    doc = json.loads(Path(memory_json).read_text())
    lines = ["| configuration | peak RSS | RSS before the update | the update's own share |", "|---|---:|---:|---:|"]
    for name, r in doc["results"].items():
        if "error" in r or name.startswith("activations/"):
            continue
        before = f"{r['rss_before_update_mib'] / 1024:.2f} GiB" if "rss_before_update_mib" in r else "-"
        share = f"{r['update_share_mib'] / 1024:.2f} GiB" if "update_share_mib" in r else "-"
        lines.append(f"| `{name}` | {r['peak_rss_mib'] / 1024:.2f} GiB | {before} | {share} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the GPU memory table of docs/real-models.md from memory.json")
    ap.add_argument("--cpu", action="store_true", help="the measured CPU configurations instead")
    ap.add_argument("--memory-json", type=Path, default=MEMORY_JSON)
    args = ap.parse_args(argv)
    print(cpu_table(args.memory_json) if args.cpu else table(args.memory_json))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
