"""GPU check: real-vocabulary RL on one GPU, through `agent-r1 train`'s own path.

A random Qwen2-shaped model with Qwen2.5-0.5B's layer shapes (hidden 896, 24 layers, 14 heads,
2 KV heads, MLP 4864; ~0.49B parameters with the real 151,936-row vocabulary, tied), built with
`agent-r1 build-model --like qwen2.5`, trains 3 RL iterations (GRPO, hermes tool calls over the
synthetic world's search index, bf16 over float32 master weights, micro-batches of 4) in each run:

- `transformers_full`: the transformers engine on the GPU, full fine-tuning;
- `transformers_lora`: the same with LoRA (`model.lora.r=16`);
- `vllm_full`: rollouts by vLLM through the Ray trainer (`rollout.engine=vllm`), where vLLM imports;
- `vllm_inproc`, `vllm_inproc_lora`: vLLM in the trainer's process (`rollout.engine=vllm`), its weights
  synced after every update (`rollout/weight_sync_s`), LoRA adapters merged into what it serves.

Each run is a fresh subprocess (its own CUDA context, so peaks do not mix). Reported per run:
rollout and update tokens/s (the trainer's `rollout_tokens_per_s`, `update_tokens_per_s`; the median
over iterations after the first), peak GPU memory (`torch.cuda.max_memory_allocated` of the learner
process, and device-wide used memory sampled every 50 ms, which also counts a vLLM worker), and
`rollout/logprob_diff_max` (engine vs trainer log-probs of the sampled tokens) per iteration.

    python -m benchmarks.gpu_smoke                      # on a GPU host (benchmarks/gpu_smoke.sh installs first)
    python -m benchmarks.gpu_smoke --tiny --device cpu  # the same script end to end on a CPU, tiny model

Writes $OUT/gpu_smoke.json when $OUT is set, else benchmarks/results/gpu_smoke.json
(gpu_smoke_cpu_tiny.json for a `--tiny --device cpu` run). With random weights the policy writes no
valid tool call, so every turn runs to its token budget and gets an error observation: the figures
measure the machinery, not learning.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, child_result, machine, result_path, run_child, work_dir, write_json

QWEN25_05B = {"hidden_size": 896, "num_layers": 24, "num_heads": 14, "num_kv_heads": 2, "intermediate_size": 4864}
# head_dim 64: vLLM's CPU attention refuses head_dim 16, so the tiny CPU check runs the vLLM paths too
TINY = {"hidden_size": 128, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 256}

#: run name -> overrides over the shared ones (see `overrides`)
RUNS: dict[str, dict[str, Any]] = {
    "transformers_full": {},
    "transformers_lora": {"model.lora.r": 16, "model.lora.alpha": 32},
    "vllm_full": {"ray.enabled": True, "rollout.engine": "vllm", "ray.num_workers": 1, "ray.gpus_per_worker": 0.3},
    # vLLM in the trainer's process (rollout.engine), weights synced after every update; LoRA served merged
    "vllm_inproc": {"rollout.engine": "vllm", "rollout.vllm.gpu_memory_utilization": 0.3},
    "vllm_inproc_lora": {"rollout.engine": "vllm", "rollout.vllm.gpu_memory_utilization": 0.3,
                         "model.lora.r": 16, "model.lora.alpha": 32},
}


def uses_vllm(run: str) -> bool:
    return RUNS[run].get("rollout.engine") == "vllm"


def overrides(args: argparse.Namespace, model_dir: Path, work: Path, run: str) -> dict[str, Any]:
    """The run's config over params.yaml: the built folder, hermes, small budgets, bf16, GRPO."""
    return {
        "train.init_from": str(model_dir), "env.format": "hermes", "algo.adv_estimator": "grpo",
        "data.dir": str(work / "data"), "search.index_dir": str(work / "index"),
        "train.out_dir": str(work / "runs" / run), "train.runs_dir": str(work / "runs"),  # never the repo's runs/
        "train.iterations": args.iterations,
        "train.prompts_per_iter": args.prompts, "rollout.n_samples": 4, "train.minibatch_size": args.prompts * 4,
        "train.micro_batch_size": 4, "train.ppo_epochs": 1, "train.precision": args.precision,
        "train.device": args.device, "train.lr": args.lr, "algo.entropy_coef": args.entropy_coef, "train.eval_size": 0, "train.log_trajectories_every": 0,
        "train.checkpoint_every": 1000, "train.threads": args.threads,
        # every row's old log-probs computed: random weights give all-equal groups, whose rows a skip
        # leaves out, and rollout/logprob_diff_max would then report 0 over no tokens
        "algo.skip_zero_advantage": False,
        "rollout.max_turns": 2, "rollout.max_tokens_per_turn": args.tokens_per_turn,
        "rollout.max_observation_tokens": 128, "rollout.max_total_tokens": 2048,
        **({"data.n_people": args.people} if args.people else {}),
        **RUNS[run],
        # a CPU run asks Ray for no GPU share (a request for one is infeasible there and waits forever)
        **({} if args.device.startswith("cuda") or "ray.gpus_per_worker" not in RUNS[run]
           else {"ray.gpus_per_worker": 0.0}),
    }


# ----------------------------------------------------------------------------- the child side
class DeviceMemorySampler:
    """Device-wide used GPU memory (every process on it, vLLM workers included), sampled in a thread."""

    def __init__(self, device: str, period: float = 0.05):
        self.device, self.period, self.peak = device, period, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _used(self) -> int:
        import torch

        free, total = torch.cuda.mem_get_info(torch.device(self.device))
        return total - free

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._used())
            time.sleep(self.period)

    def __enter__(self) -> DeviceMemorySampler:
        if self.device.startswith("cuda"):
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def child(run: str, cfg_overrides: dict[str, Any]) -> dict[str, Any]:
    import resource

    import torch

    from agent_r1.config import load_config
    from agent_r1.runs.run import run_train

    cfg = load_config(ROOT / "params.yaml", cfg_overrides)
    per_iter: list[dict[str, float]] = []
    keep = ("rollout_tokens_per_s", "update_tokens_per_s", "rollout_s", "update_s", "rollout/logprob_diff_max",
            "rollout/logprob_diff_mean", "action_tokens", "response_length", "policy_loss", "grad_norm", "kl",
            "rollout/weight_sync_s")
    cuda = cfg.train.device.startswith("cuda") or (cfg.train.device == "auto" and torch.cuda.is_available())
    t0 = time.perf_counter()
    with DeviceMemorySampler(cfg.train.device if cfg.train.device != "auto" else "cuda" if cuda else "cpu") as dev:
        run_train(cfg, on_iteration=lambda it, m: per_iter.append({k: m[k] for k in keep if k in m}))
    out: dict[str, Any] = {"seconds": round(time.perf_counter() - t0, 1), "iterations": per_iter,
                           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    later = per_iter[1:] or per_iter
    for key in ("rollout_tokens_per_s", "update_tokens_per_s"):
        values = [m[key] for m in later if key in m]
        out[key] = round(statistics.median(values), 1) if values else None
    diffs = [m["rollout/logprob_diff_max"] for m in per_iter if "rollout/logprob_diff_max" in m]
    out["logprob_diff_max"] = max(diffs) if diffs else None
    if cuda:
        gib = 2**30
        out["max_memory_allocated_gib"] = round(torch.cuda.max_memory_allocated() / gib, 3)  # this process (learner)
        out["device_used_peak_gib"] = round(dev.peak / gib, 3)
        out["gpu"] = torch.cuda.get_device_name(0)
        if cfg.ray.enabled:
            out["note"] = ("the learner runs in a Ray actor: max_memory_allocated here is the driver's; "
                           "device_used_peak_gib counts every process on the GPU")
    return out


# ----------------------------------------------------------------------------- the parent side
def build_model(work: Path, shape: dict[str, int]) -> tuple[Path, int]:
    from agent_r1.models.qwen_like import LikeShape, build_like
    from benchmarks.memory import params

    out = work / ("qwen2.5-" + "-".join(f"{v}" for v in shape.values()))
    if not (out / "config.json").exists():
        build_like("qwen2.5", out, LikeShape(**shape))
    return out, params({"hidden": shape["hidden_size"], "layers": shape["num_layers"], "heads": shape["num_heads"],
                        "kv_heads": shape["num_kv_heads"], "inter": shape["intermediate_size"], "tied": True})["total"]


def vllm_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def parse_args(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (with --tiny, to test this script)")
    ap.add_argument("--tiny", action="store_true", help="hidden 64, 2 layers (same vocabulary): a CPU check")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, from {list(RUNS)}")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per iteration (x 4 samples)")
    ap.add_argument("--tokens-per-turn", type=int, default=128)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32", "auto"])
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-6)
    # random weights earn no reward, so every advantage is 0 and nothing moves; an entropy bonus moves
    # the weights, which makes iteration 2's rollout/logprob_diff_max a check of the engine's weight sync
    ap.add_argument("--entropy-coef", type=float, default=0.0)
    ap.add_argument("--work", default=None, help="work folder (default: benchmarks/.work/gpu_smoke)")
    ap.add_argument("--people", type=int, default=None, help="data.n_people of the world (default: params.yaml's)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--overrides", help=argparse.SUPPRESS)
    return ap, ap.parse_args(argv)


def header(args: argparse.Namespace, shape: dict[str, int], n_params: int) -> dict[str, Any]:
    """The results document before its runs: model, device, versions, settings."""
    info = machine(args.device)
    return {
        "benchmark": "gpu_smoke", "command": " ".join(["python", *sys.argv]),
        "model": {"like": "qwen2.5", **shape, "vocab_size": 151_936, "parameters": n_params, "weights": "random"},
        "device": info.get("gpu", "cpu"),
        "versions": {k: info[k] for k in ("python", "torch", "transformers")},
        "settings": {"iterations": args.iterations, "lr": args.lr, "entropy_coef": args.entropy_coef,
                     "trajectories_per_iteration": args.prompts * 4,
                     "precision": args.precision, "micro_batch_size": 4, "algo": "grpo, 1 PPO epoch",
                     "max_tokens_per_turn": args.tokens_per_turn, "max_turns": 2},
        "runs": {},
    }


def main(argv: list[str] | None = None) -> int:
    ap, args = parse_args(argv)
    if args.child:
        child_result(child(args.child, json.loads(args.overrides)))
        return 0
    import torch

    unknown = sorted(set(args.runs.split(",")) - set(RUNS))
    if unknown:
        ap.error(f"--runs {unknown}: choose from {list(RUNS)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: torch {torch.__version__} sees no CUDA device; use --tiny --device cpu")
    work = Path(args.work or work_dir("gpu_smoke")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    shape = TINY if args.tiny else QWEN25_05B
    model_dir, n_params = build_model(work, shape)
    doc = header(args, shape, n_params)
    for run in args.runs.split(","):
        if uses_vllm(run) and not vllm_importable():  # the CPU build (.venv-vllm) runs them on a CPU
            doc["runs"][run] = {"skipped": "vLLM is not installed here"}
            continue
        t0 = time.perf_counter()
        doc["runs"][run] = run_child("gpu_smoke", ["--child", run, "--overrides",
                                                   json.dumps(overrides(args, model_dir, work, run))], timeout=900)
        status = "error" if "error" in doc["runs"][run] else "ok"
        print(f"{run}: {status} in {time.perf_counter() - t0:.0f} s", flush=True)
    name = "gpu_smoke_cpu_tiny" if args.device == "cpu" else "gpu_smoke"
    write_json(Path(os.environ["OUT"]) / f"{name}.json" if os.environ.get("OUT") else result_path(name), doc, indent=2)
    failed = [r for r, v in doc["runs"].items() if "error" in v]
    for r in failed:
        print(f"--- {r} failed:\n{doc['runs'][r]['error']}", file=sys.stderr)
    return 1 if failed else 0

if __name__ == "__main__":
    raise SystemExit(main())
