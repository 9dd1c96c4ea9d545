"""Memory of one RL update with Qwen2.5's 151,936-token vocabulary.

Each configuration runs in a fresh subprocess (so one configuration's allocator state never
lifts another's peak) and reports its peak resident set size:

- `update/*`: one `RLTrainer.prepare` + `RLTrainer.update` (GRPO, 2 PPO epochs, one mini-batch of
  all rows) over synthetic trajectories of 1,024 tokens: a ~200-token prompt, then action and
  observation spans alternating (4 turns; about 40% of the tokens are actions), groups of 4 per
  prompt, 0/1 outcome rewards. The policy is a `--like qwen2.5` folder (hidden 64, 2 layers, the real
  151,936-row embedding, tied), built once with `agent-r1 build-model` and loaded as a user would.
  Swept: rows 8/16/32/64 at micro-batch 4 (flat: the rows never meet in one forward); at 8 rows,
  micro-batch 2/4/8, fp32 vs bf16, gradient checkpointing on/off.
- `body/*`: the same update on a policy with Qwen2.5's proportions at hidden 512 (4 layers), 4 rows
  as micro-batches of 1 and of 4, bf16, checkpointing on/off.
- `activations/*`: that body's decoder alone, forward + backward on 1 and 3 rows of 1,024 tokens
  (bf16, checkpointing on/off): the slope is the activation memory per token that
  `learner_gib` (below) scales to real models.
- `train/e2e`: `agent-r1 train` on such a folder, hermes format, 8 prompts x 4 samples = 32
  trajectories per iteration, 2 iterations, micro-batch 4 (the child's whole lifetime peak).

Peak RSS is `ru_maxrss` of the child (its lifetime peak; the loaded model and tokenizer are in it)
plus the RSS sampled every 5 ms during the update alone and the RSS before it, so the update's own
share is `update_peak - before_update`. Wall times are recorded but are NOT comparable figures: they
were taken on a 2-core machine shared with other jobs.

    .venv/bin/python -m benchmarks.memory              # every configuration (1-2 hours on 2 shared cores)
    .venv/bin/python -m benchmarks.memory --only update/rows64_micro4_fp32

Writes benchmarks/results/memory.json. `learner_gib` and `kv_cache_gib` (the end of this file) compute
the GPU memory of Qwen2.5 models per paper preset from it; benchmarks/tables.py writes those tables.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, child_result, machine, result_path, run_child, work_dir, write_json

SEQ_TOKENS, PROMPT_TOKENS, TURNS, GROUP = 1024, 200, 4, 4
TARGET_GIB = 6.0


#: the policies: `head` isolates the output head (a body too small to matter: the vocabulary dominates);
#: `body` has Qwen2.5's proportions (MLP 5.375 x hidden, grouped-query attention) at hidden 512,
#: so that the activation memory per token and layer can be measured and scaled to real models
MODELS: dict[str, list[str]] = {
    "head": ["--hidden-size", "64", "--num-layers", "2"],
    "body": ["--hidden-size", "512", "--num-layers", "4", "--num-heads", "8", "--num-kv-heads", "2",
             "--intermediate-size", "2752"],
    "body8": ["--hidden-size", "512", "--num-layers", "8", "--num-heads", "8", "--num-kv-heads", "2",
              "--intermediate-size", "2752"],  # twice the depth: per-layer memory apart from the rest
}


def _update(rows: int, micro: int, precision: str = "fp32", ckpt: bool = False, model: str = "head") -> dict[str, Any]:
    return {"kind": "update", "rows": rows, "micro_batch_size": micro, "precision": precision,
            "gradient_checkpointing": ckpt, "model": model}


#: name -> child spec. Micro-batch, precision and checkpointing are compared at 8 rows: with
#: micro-batches the peak does not depend on the rows (the rows sweep checks that), and 8 rows take
#: minutes where 64 take a quarter of an hour on a shared core.
CONFIGS: dict[str, dict[str, Any]] = {
    "update/rows8_micro4_fp32": _update(8, 4),
    "update/rows8_micro2_fp32": _update(8, 2),
    "update/rows8_micro8_fp32": _update(8, 8),
    "update/rows8_micro4_bf16": _update(8, 4, "bf16"),
    "update/rows8_micro4_fp32_ckpt": _update(8, 4, ckpt=True),
    "update/rows8_micro4_bf16_ckpt": _update(8, 4, "bf16", ckpt=True),
    "train/e2e": {"kind": "train", "prompts_per_iter": 8, "n_samples": 4, "iterations": 2, "micro_batch_size": 4},
    "update/rows64_micro4_fp32": _update(64, 4),  # the target: <= 6 GiB
    "update/rows16_micro4_fp32": _update(16, 4),
    "update/rows32_micro4_fp32": _update(32, 4),
    # the update's peak with a Qwen2.5-proportioned body (micro-batch 1 vs 4 of the same 4 rows)
    "body/rows4_micro1_bf16": _update(4, 1, "bf16", model="body"),
    "body/rows4_micro4_bf16": _update(4, 4, "bf16", model="body"),
    "body/rows4_micro1_bf16_ckpt": _update(4, 1, "bf16", True, model="body"),
    "body/rows4_micro4_bf16_ckpt": _update(4, 4, "bf16", True, model="body"),
    # activation memory per token of the decoder alone (forward + backward, bf16 autocast): 1 vs 3
    # rows of 1,024 tokens. The update runs above cannot give it: the output head's chunk grows with
    # the positions of a micro-batch up to 1,024 and hides the body's share.
    **{f"activations/{m}_rows{r}_bf16{'_ckpt' if c else ''}": {"kind": "activations", "rows": r,
                                                              "gradient_checkpointing": c, "model": m}
       for m in ("body", "body8") for c in (False, True) for r in (1, 3)},
}


# ----------------------------------------------------------------------------- the child side
class RssSampler:
    """The process's RSS every `period` seconds in a thread; `peak` is the highest seen."""

    def __init__(self, period: float = 0.005):
        import psutil

        self.proc, self.period, self.peak = psutil.Process(), period, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.period)

    def __enter__(self) -> RssSampler:
        self.peak = self.proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def synthetic_trajectories(rows: int, seed: int = 0, scale: int = 1) -> list[Any]:
    """`rows` trajectories of exactly SEQ_TOKENS // scale tokens: prompt, then TURNS action/observation
    pairs (the last turn an answer without observation), lengths jittered per row; every length is
    divided by `scale` (1 for the figures; the smoke run's `seq_scale` is 8)."""
    from agent_r1.trajectory import Trajectory, Turn

    rng = random.Random(seed)
    trajs = []
    for i in range(rows):
        prompt = (PROMPT_TOKENS + rng.randint(-16, 16)) // scale
        left = SEQ_TOKENS // scale - prompt
        turns = []
        for t in range(TURNS):
            last = t == TURNS - 1
            n_act = left if last else rng.randint(70, 130) // scale
            n_obs = 0 if last else min(rng.randint(90, 150) // scale, left - n_act - 40 // scale * (TURNS - 1 - t))
            turns.append(Turn(action_ids=[rng.randrange(151_643) for _ in range(n_act)],
                              action_logprobs=[-2.0] * n_act, action_text="",
                              observation_ids=[rng.randrange(151_643) for _ in range(n_obs)]))
            left -= n_act + n_obs
        # one right answer per group, the rest at random: no group is all-equal, so every row trains
        reward = 1.0 if i % GROUP == 0 else float(rng.random() < 0.3)
        trajs.append(Trajectory(sample_id=f"q{i // GROUP}", prompt_ids=[rng.randrange(151_643) for _ in range(prompt)],
                                turns=turns, outcome_reward=reward, stop_reason="answer"))
        assert len(trajs[-1].token_ids) == SEQ_TOKENS // scale
    return trajs


def child_update(spec: dict[str, Any], model_dir: Path, threads: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    from agent_r1.config import load_config
    from agent_r1.models.build import load_model
    from agent_r1.training.trainer import RLTrainer

    cfg = load_config(ROOT / "params.yaml", {
        "model.name_or_path": str(model_dir), "env.format": "hermes", "algo.adv_estimator": "grpo",
        "rollout.n_samples": GROUP, "train.ppo_epochs": 2, "train.minibatch_size": spec["rows"],
        "train.micro_batch_size": spec["micro_batch_size"], "train.precision": spec["precision"],
        "model.gradient_checkpointing": spec["gradient_checkpointing"], "train.device": "cpu",
        "train.out_dir": str(work_dir("memory") / "unused")})
    model, tok = load_model(model_dir)
    trainer = RLTrainer(cfg, model, tok, make_env=None, train_samples=[{"id": "unused"}])
    trajs = synthetic_trajectories(spec["rows"], scale=spec.get("seq_scale", 1))
    out: dict[str, Any] = {"parameters": sum(p.numel() for p in model.parameters()), "rss_model_loaded_mib": rss_mib()}
    t0 = time.perf_counter()
    with RssSampler() as prep:
        batch = trainer.prepare(trajs)
    t1 = time.perf_counter()
    out["rss_before_update_mib"] = rss_mib()
    with RssSampler() as upd:
        metrics = trainer.update(batch)
    t2 = time.perf_counter()
    out.update({
        "prepare_peak_mib": prep.peak / 2**20, "update_peak_mib": upd.peak / 2**20,
        "update_share_mib": upd.peak / 2**20 - out["rss_before_update_mib"],
        "tokens": int(batch["attention_mask"].sum()), "action_tokens": int(batch["action_mask"].sum()),
        "prepare_s": t1 - t0, "update_s": t2 - t1, "policy_loss": metrics.get("policy_loss"),
        "grad_norm": metrics.get("grad_norm"),
    })
    return out


def child_train(spec: dict[str, Any], model_dir: Path, threads: int) -> dict[str, Any]:
    """`agent-r1 train` in this process (its lifetime peak is this child's ru_maxrss)."""
    from agent_r1.cli import main

    work = work_dir("memory")
    out_dir = work / "train_e2e"
    args = ["train", "--params", str(ROOT / "params.yaml"),
            "--set", f"train.init_from={model_dir}", "--set", "env.format=hermes",
            "--set", f"data.dir={work / 'data'}", "--set", f"search.index_dir={work / 'index'}",
            "--set", f"train.out_dir={out_dir}", "--set", f"train.iterations={spec['iterations']}",
            "--set", f"train.prompts_per_iter={spec['prompts_per_iter']}",
            "--set", f"rollout.n_samples={spec['n_samples']}", "--set", "train.minibatch_size=32",
            "--set", f"train.micro_batch_size={spec['micro_batch_size']}", "--set", "train.eval_size=0",
            "--set", f"train.threads={threads}", "--set", "train.log_trajectories_every=0",
            "--set", "train.checkpoint_every=100", "--set", "train.device=cpu"]
    t0 = time.perf_counter()
    rc = main(args)
    lines = [json.loads(x) for x in (out_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in lines if "update_s" in r.get("metrics", r)]
    last = rows[-1].get("metrics", rows[-1]) if rows else {}
    return {"rc": rc, "command": "agent-r1 " + " ".join(args), "seconds": time.perf_counter() - t0,
            "trajectories_per_iteration": spec["prompts_per_iter"] * spec["n_samples"],
            "response_length": last.get("response_length"), "action_tokens": last.get("action_tokens"),
            "rollout/logprob_diff_max": last.get("rollout/logprob_diff_max")}


def child_activations(spec: dict[str, Any], model_dir: Path, threads: int) -> dict[str, Any]:
    """The decoder's forward + backward (as `token_logprobs` runs it) on `rows` x SEQ_TOKENS tokens;
    gradients are allocated by a warm-up first, so the sampled peak over the RSS before is activations
    (plus the embedding's dense gradient temporary, the same for any number of rows)."""
    import torch

    from agent_r1.models.build import load_model
    from agent_r1.training.compute import Compute, place_policy

    torch.set_num_threads(threads)
    model, _ = load_model(model_dir)
    model = place_policy(model, Compute(device=torch.device("cpu"), precision="bf16"), spec["gradient_checkpointing"])
    model.train()
    decoder = model.get_decoder()
    ids = torch.randint(0, 151_643, (spec["rows"], SEQ_TOKENS), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)

    def step(n: int) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = decoder(input_ids=ids[:, :n], attention_mask=mask[:, :n]).last_hidden_state
        hidden.float().square().mean().backward()

    step(8)  # gradients, autocast weight copies, allocator pools
    before = rss_mib()
    with RssSampler() as s:
        step(SEQ_TOKENS)
    return {"rss_before_mib": before, "peak_mib": s.peak / 2**20, "share_mib": s.peak / 2**20 - before,
            "tokens": spec["rows"] * SEQ_TOKENS}


CHILDREN = {"update": child_update, "train": child_train, "activations": child_activations}


def run_spec(spec: dict[str, Any], model_dir: Path, threads: int) -> dict[str, Any]:
    fn = CHILDREN[spec["kind"]]
    out = fn(spec, model_dir, threads)
    out["peak_rss_mib"] = max_rss_mib()  # the whole child's lifetime peak
    return out


# ----------------------------------------------------------------------------- the parent side
def ensure_model(work: Path, model: str) -> Path:
    out = work / ("qwen2.5-h64-l2" if model == "head" else f"qwen2.5-{model}")
    if not (out / "config.json").exists():
        subprocess.run([sys.executable, "-m", "agent_r1.cli", "build-model", "--like", "qwen2.5", "--out", str(out),
                        *MODELS[model]], check=True, cwd=ROOT)
    return out


def measure(name: str, spec: dict[str, Any], model_dir: Path, threads: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    result = run_child("memory", ["--child", json.dumps(spec), "--model", str(model_dir), "--threads", str(threads)])
    if "error" in result:
        return {**spec, **result}
    result = {**spec, **{k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}}
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    print(f"{name}: peak RSS {result['peak_rss_mib']:.0f} MiB", flush=True)
    return result


def derived(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per-token figures for extrapolation (docs/real-models.md)."""
    out: dict[str, Any] = {}
    main = results.get("update/rows64_micro4_fp32", {})
    if "peak_rss_mib" in main:
        out["target_rows64_micro4_peak_gib"] = round(main["peak_rss_mib"] / 1024, 3)
        out["target_met"] = main["peak_rss_mib"] / 1024 <= TARGET_GIB
        out["update_share_bytes_per_microbatch_token"] = round(
            main["update_share_mib"] * 2**20 / (main["micro_batch_size"] * SEQ_TOKENS))
        out["peak_bytes_per_batch_row_token"] = round(main["peak_rss_mib"] * 2**20 / (main["rows"] * SEQ_TOKENS))
    rows = {r["rows"]: r["peak_rss_mib"] for n, r in results.items()
            if n.startswith("update/rows") and n.endswith("micro4_fp32") and "peak_rss_mib" in r}
    if rows:
        out["peak_rss_mib_by_rows_at_micro4"] = dict(sorted(rows.items()))
        out["rows_spread_mib"] = round(max(rows.values()) - min(rows.values()), 1)
    micro = {r["micro_batch_size"]: r["update_share_mib"] for n, r in results.items()
             if n.startswith("update/rows8_micro") and n.endswith("_fp32") and "update_share_mib" in r}
    if micro:
        # flat once a micro-batch holds >= 1,024 action positions (one full output-head chunk): the
        # head's chunk over the vocabulary, not the rows or the body, sets this model's peak
        out["update_share_mib_by_micro_at_rows8"] = dict(sorted(micro.items()))
    if "update_share_mib" in main:
        out["head_bytes_per_chunk_position_fp32"] = round(main["update_share_mib"] * 2**20 / 1024)
    for tag in ("", "_ckpt"):
        per_token = {}  # model -> activation bytes per token (slope between 1 and 3 rows)
        for m in ("body", "body8"):
            one, three = (results.get(f"activations/{m}_rows{r}_bf16{tag}", {}) for r in (1, 3))
            if "share_mib" in one and "share_mib" in three:
                per_token[m] = (three["share_mib"] - one["share_mib"]) * 2**20 / (2 * SEQ_TOKENS)
        if len(per_token) == 2:
            # 4 vs 8 layers at hidden 512: what each layer adds, and what does not grow with depth
            # (embedding output, final norm, the loss's own tensors; with checkpointing, the one
            # layer being recomputed), both per token per hidden unit, to scale to other shapes
            layer = (per_token["body8"] - per_token["body"]) / 4
            out[f"activation_bytes_per_token_bf16{tag}"] = {m: round(v) for m, v in per_token.items()}
            out[f"activation_bytes_per_token_layer_hidden_bf16{tag}"] = round(layer / 512, 2)
            out[f"activation_bytes_per_token_hidden_fixed_bf16{tag}"] = round((per_token["body"] - 4 * layer) / 512, 2)
    head = results.get("update/rows8_micro4_bf16", {})
    if "update_share_mib" in head:  # the log-prob chunk over the vocabulary, less gradients + AdamW state
        out["head_chunk_mib_bf16"] = round(head["update_share_mib"] - 12 * head["parameters"] / 2**20, 1)
    return out


# the smoke tests' one configuration: 4 rows of 128 tokens (every length of the figures' rows / 8)
SMOKE = {"smoke/update_rows4_micro2_seq128": {**_update(4, 2), "seq_scale": 8}}
SETUP = {"seq_tokens": SEQ_TOKENS, "prompt_tokens": PROMPT_TOKENS, "turns": TURNS, "group": GROUP,
         "model": "agent-r1 build-model --like qwen2.5 --hidden-size 64 --num-layers 2",
         "vocab": 151_936, "algo": "grpo, ppo_epochs 2, one mini-batch of all rows",
         "timings": "not comparable: a 2-core machine shared with other jobs"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", help=f"a configuration name (repeatable): {', '.join(CONFIGS)}")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per child (1 leaves the other core alone)")
    ap.add_argument("--smoke", action="store_true", help=f"only {list(SMOKE)} (the smoke tests: seconds)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_result(run_spec(json.loads(args.child), Path(args.model), args.threads))
        return 0
    work = work_dir("memory")
    work.mkdir(parents=True, exist_ok=True)
    path = result_path("memory")
    doc = json.loads(path.read_text()) if path.exists() and args.only else {"results": {}}
    configs = SMOKE if args.smoke else CONFIGS
    unknown = sorted(set(args.only or []) - set(configs))
    if unknown:
        ap.error(f"--only {unknown}: choose from {list(configs)}")
    for name in args.only or list(configs):
        model_dir = ensure_model(work, configs[name].get("model", "head"))
        doc["results"][name] = measure(name, configs[name], model_dir, args.threads)
        doc.update({"benchmark": "memory", "command": "python -m benchmarks.memory", "machine": machine("cpu"),
                    "setup": SETUP, "target_gib": TARGET_GIB, "derived": derived(doc["results"])})
        write_json(path, doc, indent=2)  # after each, so a long run keeps what it measured
    print(json.dumps(doc["derived"], indent=2))
    return 0

# ----------------------------------------------------------------------------- GPU memory, computed
# Learner peak on one GPU, COMPUTED (not measured on a GPU) from the per-token memory above and Qwen2.5's
# parameter counts: weights and optimiser state + activations of one micro-batch + the output head's
# log-prob chunk + a flat allowance for the CUDA context and allocator slack (docs/real-models.md has the
# method). Full fine-tuning: 16 bytes/parameter (float32 weights, gradients, AdamW m and v), the KL
# reference a float32 copy, PPO's critic a full copy of the decoder. LoRA r=16 on the 7 linear layers of
# every block: the frozen base in bf16, adapters at 16 bytes/parameter, the reference the base with
# adapters off, PPO's critic a frozen bf16 copy with its own adapter (agent_r1/training/compute.py).
GIB = 2**30
CUDA_SLACK_GIB = 1.5  # CUDA context (~0.5 GiB) and caching-allocator fragmentation: an allowance, not a measurement
LORA_R = 16
VOCAB = 151_936
#: Qwen2.5 shapes from their config.json files (all: 151,936 vocabulary, head_dim 128)
QWEN25 = {
    "Qwen2.5-1.5B": {"hidden": 1536, "layers": 28, "heads": 12, "kv_heads": 2, "inter": 8960, "tied": True},
    "Qwen2.5-3B": {"hidden": 2048, "layers": 36, "heads": 16, "kv_heads": 2, "inter": 11008, "tied": True},
    "Qwen2.5-7B": {"hidden": 3584, "layers": 28, "heads": 28, "kv_heads": 4, "inter": 18944, "tied": False},
}


def params(m: dict[str, Any]) -> dict[str, int]:
    """Parameter counts: total, decoder body (what the critic copies), LoRA adapters at r=16."""
    h, inter, kv = m["hidden"], m["inter"], m["kv_heads"] * m["hidden"] // m["heads"]
    per_layer = 2 * h * h + 2 * h * kv + h + 2 * kv + 3 * h * inter + 2 * h  # attention (+ qkv biases), MLP, norms
    body = VOCAB * h + m["layers"] * per_layer + h
    total = body + (0 if m["tied"] else VOCAB * h)
    # LoRA A (in x r) and B (r x out) on q, k, v, o, gate, up, down
    lora = LORA_R * m["layers"] * ((h + h) + 2 * (h + kv) + (h + h) + 2 * (h + inter) + (inter + h))
    return {"total": total, "body": body, "lora": lora}


def activation_per_layer(derived: dict[str, Any], ckpt: bool) -> float:
    """Activation bytes per token, hidden unit and layer, measured at 4 and 8 layers (hidden 512). With
    checkpointing each layer keeps its float32 input (4 bytes), below what RSS resolves on the CPU."""
    measured = derived[f"activation_bytes_per_token_layer_hidden_bf16{'_ckpt' if ckpt else ''}"]
    return max(measured, 4.0) if ckpt else measured


def head_bytes(results: dict[str, Any]) -> float:
    """The output head's log-prob chunk: the bf16 head model's update share less its fp32 gradients + AdamW m, v."""
    r = results["update/rows8_micro4_bf16"]
    return r["update_share_mib"] * 2**20 - 12 * r["parameters"]


def learner_gib(m: dict[str, Any], cfg: Any, lora: bool, doc: dict[str, Any]) -> float:
    """The learner's peak GiB for model shape `m` under a preset's config, from memory.json's `doc`."""
    from agent_r1.algos import ADV_ESTIMATORS

    p, derived = params(m), doc["derived"]
    critic = ADV_ESTIMATORS.traits(cfg.algo.adv_estimator).critic  # the estimator's own trait, not its name
    if lora:
        static = 2 * p["total"] + 16 * p["lora"] + (2 * p["body"] + 16 * p["lora"] + 4 * m["hidden"] if critic else 0)
    else:
        static = 16 * p["total"] + (4 * p["total"] if cfg.algo.kl_coef > 0 else 0) + (16 * p["body"] if critic else 0)
    ckpt = cfg.model.gradient_checkpointing
    fixed = derived[f"activation_bytes_per_token_hidden_fixed_bf16{'_ckpt' if ckpt else ''}"]
    # one micro-batch at the token budget (the worst case: a micro-batch is cut to its longest row)
    tokens = cfg.train.micro_batch_size * cfg.rollout.max_total_tokens
    act = tokens * m["hidden"] * (activation_per_layer(derived, ckpt) * m["layers"] + fixed)
    return (static + act + head_bytes(doc["results"])) / GIB + CUDA_SLACK_GIB


def kv_cache_gib(m: dict[str, Any], cfg: Any) -> float:
    """The transformers engine's KV cache for the whole batch (every trajectory of the iteration at once)."""
    kv = m["kv_heads"] * m["hidden"] // m["heads"]
    trajectories = cfg.train.prompts_per_iter * cfg.rollout.n_samples
    return 2 * m["layers"] * kv * 2 * trajectories * cfg.rollout.max_total_tokens / GIB


if __name__ == "__main__":
    raise SystemExit(main())
