"""Ray overhead: iteration time of the Ray trainer over the in-process trainer, same config.

Three trainers on the same config and seed, alive at once, take turns iteration by iteration
(so a shared, busy machine loads them alike):
  - the in-process `RLTrainer` (torch threads = train.threads),
  - the Ray trainer with one rollout worker (cpus_per_worker = train.threads): it rolls out the
    same trajectories as in-process, so the difference is the Ray layer alone,
  - the Ray trainer with two workers of one CPU each (on 2 cores: no extra compute to gain).
Reports the median wall time per iteration after a warm-up iteration. Target: the one-worker
Ray trainer within 1.15x of in-process. Writes benchmarks/results/ray.json.

    python -m benchmarks.ray_overhead              # a few minutes on 2 idle cores
    python -m benchmarks.ray_overhead --iterations 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from agent_r1.config import load_config
from benchmarks.common import loadavg, result_path, work_dir, write_json
from benchmarks.ray_bench_common import add_smoke_arg, prepare_world, ray_machine, small_config

RAY = {"ray.enabled": True, "ray.learner_cpus": 1}
RUNS = {
    "in_process": {},
    "ray_1_worker": {**RAY, "ray.num_workers": 1, "ray.cpus_per_worker": 2},
    "ray_2_workers": {**RAY, "ray.num_workers": 2, "ray.cpus_per_worker": 1},
}


def in_process_trainer(cfg):
    from agent_r1.runs.run import Run
    from agent_r1.training.trainer import RLTrainer

    run = Run(cfg)
    parts = run.parts()
    return RLTrainer(run.cfg, parts.model, parts.tokenizer, run.env_factory, parts.train_samples,
                     parts.eval_samples, reference=parts.reference), run


def summarise(steps: list[tuple[float, dict]]) -> dict:
    timed = steps[1:]  # the first is a warm-up: first-call costs (allocations, lazy imports)
    walls = [w for w, _ in timed]
    return {"iteration_s_median": round(statistics.median(walls), 4), "iteration_s": [round(w, 4) for w in walls],
            "rollout_s_median": round(statistics.median(m["rollout_s"] for _, m in timed), 4),
            "update_s_median": round(statistics.median(m["update_s"] for _, m in timed), 4),
            "reward_mean": [m["reward_mean"] for _, m in steps],
            "policy_loss": [m.get("policy_loss") for _, m in steps]}


def run_all(base, cfgs: dict, iterations: int) -> tuple[dict[str, list], dict[str, float]]:
    """Every trainer in one Ray session, taking turns iteration by iteration: (steps, start-up seconds)."""
    import ray

    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer, init_ray

    needed = sum(int(c.ray.learner_cpus + c.ray.num_workers * c.ray.cpus_per_worker) for c in cfgs.values() if c.ray.enabled)
    owned = init_ray(replace(base.ray, num_cpus=needed))  # logical CPUs: the trainers take turns
    trainers, startup = {}, {}
    inproc_run = None
    try:
        for name, cfg in cfgs.items():
            t0 = time.perf_counter()
            if cfg.ray.enabled:
                trainers[name] = RayTrainer(Run(cfg).spec())
            else:
                trainers[name], inproc_run = in_process_trainer(cfg)
            startup[name] = round(time.perf_counter() - t0, 2)
        steps: dict[str, list] = {name: [] for name in cfgs}
        for i in range(iterations + 1):
            for name, trainer in trainers.items():
                t0 = time.perf_counter()
                metrics = trainer.train_step()
                steps[name].append((time.perf_counter() - t0, metrics))
            print(f"iteration {i}: " + ", ".join(f"{n} {s[-1][0]:.2f}s" for n, s in steps.items()), flush=True)
    finally:
        for trainer in trainers.values():
            if hasattr(trainer, "close"):
                trainer.close()
        if inproc_run is not None:
            inproc_run.close()
        if owned:  # a caller's Ray session (the smoke tests') stays up
            ray.shutdown()
    return steps, startup


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations per run (after one warm-up)")
    ap.add_argument("--out", default=str(result_path("ray")))
    ap.add_argument("--runs", default=",".join(RUNS), help=f"comma list of {list(RUNS)} (in_process always runs)")
    add_smoke_arg(ap)
    args = ap.parse_args(argv)
    runs_asked = {"in_process", *args.runs.split(",")}
    WORK = work_dir("ray")
    CONFIG = small_config(WORK, args.smoke, **{"train.threads": 2})

    import torch

    base = prepare_world(CONFIG, WORK)
    cfgs = {name: load_config(None, {**CONFIG, **over, "train.out_dir": str(WORK / name)})
            for name, over in RUNS.items() if name in runs_asked}
    load_before = loadavg()
    torch.set_num_threads(base.train.threads)
    steps, startup = run_all(base, cfgs, args.iterations)
    runs = {name: {**summarise(s), "startup_s": startup[name]} for name, s in steps.items()}
    reference = runs["in_process"]["iteration_s_median"]

    def ratio(name: str) -> float | None:
        return round(runs[name]["iteration_s_median"] / reference, 3) if name in runs else None

    result = {
        "what": "median wall seconds per training iteration (after one warm-up), same config and seed",
        "config": CONFIG, "iterations_timed": args.iterations,
        "runs": runs,
        "ratio_ray_1_worker_over_in_process": ratio("ray_1_worker"),
        "ratio_ray_2_workers_over_in_process": ratio("ray_2_workers"),
        "target_ratio_1_worker": 1.15,
        # one worker reproduces the in-process run: the same rewards, iteration by iteration
        "one_worker_same_rewards_as_in_process": (runs["ray_1_worker"]["reward_mean"] == runs["in_process"]["reward_mean"]
                                                  if "ray_1_worker" in runs else None),
        "note": "a shared machine: see loadavg; the trainers take turns so they see the same load",
        "machine": {**ray_machine(), "loadavg_before": load_before, "loadavg_after": loadavg()},
    }
    write_json(Path(args.out), result)
    print(json.dumps({k: v for k, v in result.items() if k.startswith(("ratio", "one_worker"))}, indent=1))
    for name, r in runs.items():
        print(f"{name:18s} {r['iteration_s_median']:.3f} s/iter  (rollout {r['rollout_s_median']:.3f}, "
              f"update {r['update_s_median']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
