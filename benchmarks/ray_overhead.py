"""Ray overhead: iteration time of the Ray trainer over the in-process trainer, same config.

Runs the same iterations (same seed) with
  - the in-process `RLTrainer` (torch threads = train.threads),
  - the Ray trainer with one rollout worker (cpus_per_worker = train.threads): the same
    trajectories as in-process, so the difference is the Ray layer alone,
  - the Ray trainer with two workers of one CPU each (on a 2-core machine: no extra compute),
  - the in-process trainer again (drift of a shared machine),
and reports the median wall time per iteration after a warm-up iteration. Target: the
one-worker Ray trainer within 1.15x of in-process. Writes benchmarks/results/ray.json.

    python benchmarks/ray_overhead.py              # about 3-5 minutes on 2 cores
    python benchmarks/ray_overhead.py --iterations 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_r1.config import load_config  # noqa: E402

WORK = ROOT / "benchmarks" / ".work" / "ray"
CONFIG = {
    "data.dir": str(WORK / "data"), "search.index_dir": str(WORK / "index"), "data.n_people": 120,
    "model.hidden_size": 128, "model.num_layers": 2, "model.num_heads": 4, "model.intermediate_size": 256,
    "model.vocab_size": 600, "train.prompts_per_iter": 8, "rollout.n_samples": 4, "rollout.max_turns": 3,
    "rollout.max_tokens_per_turn": 24, "train.ppo_epochs": 2, "train.minibatch_size": 16, "train.threads": 2,
    "train.eval_every": 0, "algo.adv_estimator": "grpo",
}


def in_process(cfg, iterations: int) -> dict:
    import torch

    from agent_r1.retrieval.base import open_index
    from agent_r1.training.run import prepare_run
    from agent_r1.training.setup import make_env_factory
    from agent_r1.training.trainer import RLTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.train.threads)
    parts = prepare_run(cfg)
    retriever = open_index(parts.index_dir)
    trainer = RLTrainer(cfg, parts.model, parts.tokenizer, make_env_factory(cfg, retriever), parts.train_samples,
                        parts.eval_samples, reference=parts.reference)
    try:
        return _time(trainer, iterations)
    finally:
        retriever.close()
        torch.set_num_threads(threads)


def on_ray(cfg, iterations: int) -> dict:
    from agent_r1.training.ray_trainer import RayTrainer

    t0 = time.perf_counter()
    with RayTrainer(cfg) as trainer:
        startup = time.perf_counter() - t0
        out = _time(trainer, iterations)
    out["startup_s"] = round(startup, 2)
    return out


def _time(trainer, iterations: int) -> dict:
    walls, rollouts, updates, rewards = [], [], [], []
    for i in range(iterations + 1):
        t0 = time.perf_counter()
        m = trainer.train_step()
        wall = time.perf_counter() - t0
        rewards.append(m["reward_mean"])
        if i == 0:
            continue  # warm-up: first-call costs (allocations, lazy imports)
        walls.append(wall)
        rollouts.append(m["rollout_s"])
        updates.append(m["update_s"])
    return {"iteration_s_median": round(statistics.median(walls), 4), "iteration_s": [round(w, 4) for w in walls],
            "rollout_s_median": round(statistics.median(rollouts), 4),
            "update_s_median": round(statistics.median(updates), 4), "reward_mean": rewards}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations per run (after one warm-up)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ray.json"))
    args = ap.parse_args()

    import ray
    import torch

    from agent_r1.training.ray_trainer import init_ray
    from agent_r1.training.setup import ensure_data, ensure_index

    base = load_config(None, {**CONFIG, "train.out_dir": str(WORK / "prep")})
    ensure_index(base, ensure_data(base))
    load_before = os.getloadavg()
    runs: dict[str, dict] = {}
    runs["in_process"] = in_process(load_config(None, {**CONFIG, "train.out_dir": str(WORK / "a")}), args.iterations)
    ray_cfg = {"ray.enabled": True, "ray.learner_cpus": 1}
    init_ray(load_config(None, {**CONFIG, **ray_cfg, "ray.num_workers": 2}).ray)
    try:
        runs["ray_1_worker"] = on_ray(load_config(None, {**CONFIG, **ray_cfg, "ray.num_workers": 1,
                                                         "ray.cpus_per_worker": 2, "train.out_dir": str(WORK / "b")}),
                                      args.iterations)
        runs["ray_2_workers"] = on_ray(load_config(None, {**CONFIG, **ray_cfg, "ray.num_workers": 2,
                                                          "ray.cpus_per_worker": 1, "train.out_dir": str(WORK / "c")}),
                                       args.iterations)
    finally:
        ray.shutdown()
    runs["in_process_again"] = in_process(load_config(None, {**CONFIG, "train.out_dir": str(WORK / "d")}),
                                          args.iterations)
    reference = statistics.mean([runs["in_process"]["iteration_s_median"], runs["in_process_again"]["iteration_s_median"]])
    result = {
        "what": "median wall seconds per training iteration (after one warm-up), same config and seed",
        "config": CONFIG, "iterations_timed": args.iterations,
        "runs": runs,
        "ratio_ray_1_worker_over_in_process": round(runs["ray_1_worker"]["iteration_s_median"] / reference, 3),
        "ratio_ray_2_workers_over_in_process": round(runs["ray_2_workers"]["iteration_s_median"] / reference, 3),
        "target_ratio_1_worker": 1.15,
        # one worker reproduces the in-process run: the same rewards, iteration by iteration
        "one_worker_same_rewards_as_in_process": runs["ray_1_worker"]["reward_mean"] == runs["in_process"]["reward_mean"],
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    "torch": torch.__version__, "ray": ray.__version__,
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()]},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k.startswith(("ratio", "one_worker"))}, indent=1))
    for name, r in runs.items():
        print(f"{name:18s} {r['iteration_s_median']:.3f} s/iter  (rollout {r['rollout_s_median']:.3f}, "
              f"update {r['update_s_median']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
