"""Asynchronous training speed: seconds per iteration, synchronous vs `train.max_staleness: 1`.

Same config and seed, 2 rollout workers (1 CPU each) and a learner (1 CPU); only max_staleness
differs. The two modes alternate run by run (sync, async, sync, async, ...), each run a fresh Ray
trainer (its start-up not timed), so a shared, busy machine loads both alike. A run is one
warm-up iteration then `--iterations` timed ones; `train.iterations` is set far beyond them, so the
asynchronous run is in steady state (the next rollout always in flight; it is discarded at the end).
Runs must not interleave iterations of two live trainers: an asynchronous trainer keeps rolling
out between its own steps and would load the other's timing.

Two more modes, `sync_one_worker` and `async_1_one_worker`, give the 2 cores to one rollout worker
and the learner (the learner and 2 workers are 3 busy processes on 2 cores while they overlap):
another config, compared with its own synchronous run and reported beside the figure.

Reports the median over repeats of each run's mean seconds per timed iteration, and the ratio
sync / async (target: >= 1.3). Writes benchmarks/results/scale.json (section "async_speed").

    python -m benchmarks.async_speed                      # about 4 minutes on 2 cores
    python -m benchmarks.async_speed --repeats 2 --iterations 3
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_r1.config import load_config
from benchmarks.common import loadavg, result_path, update_results, work_dir
from benchmarks.ray_bench_common import add_smoke_arg, prepare_world, ray_machine, small_config, timed_ray_run


def config(work: Path, smoke: bool = False) -> dict[str, Any]:
    return small_config(work, smoke, **{
        "train.threads": 1, "train.iterations": 1000, "train.checkpoint_every": 1000,
        "ray.enabled": True, "ray.num_workers": 2, "ray.cpus_per_worker": 1, "ray.learner_cpus": 1,
    })

# mode -> (max_staleness, config overrides). "async_1" is the figure (the same config as "sync");
# "async_1_one_worker" splits the 2 cores between one rollout worker and the learner instead of
# putting 3 busy processes on them (a different config: reported beside the figure, not as it)
# "sync_one_worker" is its synchronous twin: each asynchronous mode is compared with the
# synchronous run of its own config (PAIRS)
MODES = {"sync": (0, {}), "async_1": (1, {}), "sync_one_worker": (0, {"ray.num_workers": 1}),
         "async_1_one_worker": (1, {"ray.num_workers": 1})}
PAIRS = {"async_1": "sync", "async_1_one_worker": "sync_one_worker"}


def paired_speedups(runs: dict[str, list[dict]]) -> dict[str, float]:
    """Median over repeats of sync / async of the same config, each ratio within one repeat (runs
    seconds apart, so load that drifts between repeats cancels)."""
    return {mode: round(statistics.median(s["iteration_s_mean"] / r["iteration_s_mean"]
                                          for s, r in zip(runs[PAIRS[mode]], runs[mode])), 3)
            for mode in PAIRS if runs.get(mode) and runs.get(PAIRS[mode])}


def speedup(medians: dict[str, float], sync: str, asynchronous: str) -> float | None:
    return round(medians[sync] / medians[asynchronous], 3) if sync in medians and asynchronous in medians else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=4, help="timed iterations per run (after one warm-up)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per mode, alternated")
    ap.add_argument("--out", default=str(result_path("scale")))
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma list of {list(MODES)}")
    add_smoke_arg(ap)
    args = ap.parse_args(argv)
    modes = {m: MODES[m] for m in args.modes.split(",")}
    WORK = work_dir("async")
    CONFIG = config(WORK, args.smoke)

    import ray

    from agent_r1.training.ray_trainer import init_ray

    base = prepare_world(CONFIG, WORK)
    load_before = loadavg()
    owned = init_ray(replace(base.ray, num_cpus=int(base.ray.learner_cpus + base.ray.num_workers * base.ray.cpus_per_worker)))
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    try:
        for r in range(args.repeats):
            for mode, (k, over) in modes.items():
                cfg = load_config(None, {**CONFIG, **over, "train.out_dir": str(WORK / f"{mode}_{r}")})
                cfg.train.max_staleness = k  # read with getattr until config.py declares it
                runs[mode].append({**timed_ray_run(cfg, args.iterations), "loadavg_after": loadavg()})
                print(f"repeat {r} {mode:8s} {runs[mode][-1]['iteration_s_mean']:.2f} s/iter "
                      f"(waits {runs[mode][-1]['rollout_wait_s']}, updates {runs[mode][-1]['update_s']})", flush=True)
    finally:
        if owned:  # a caller's Ray session (the smoke tests') stays up
            ray.shutdown()
    medians = {mode: round(statistics.median(x["iteration_s_mean"] for x in rs), 4) for mode, rs in runs.items()}
    section = {
        "what": "seconds per training iteration, synchronous vs train.max_staleness 1: median over alternated "
                "repeats of each run's mean over timed iterations (after one warm-up), same config and seed",
        "command": f"python -m benchmarks.async_speed --iterations {args.iterations} --repeats {args.repeats}",
        "config": CONFIG, "iterations_timed": args.iterations, "repeats": args.repeats,
        "iteration_s_median": medians, "runs": runs,
        "speedup_sync_over_async": speedup(medians, "sync", "async_1"),
        "speedup_sync_over_async_one_worker": speedup(medians, "sync_one_worker", "async_1_one_worker"),
        "pairs": PAIRS,
        # per repeat, sync over each asynchronous run next to it: robust to load that drifts between repeats
        "speedup_paired_median": paired_speedups(runs),
        "modes": {mode: {"max_staleness": k, "overrides": over} for mode, (k, over) in modes.items()},
        "target_speedup": 1.3,
        "machine": {**ray_machine(), "loadavg_before": load_before, "loadavg_after": loadavg()},
    }
    out = Path(args.out)
    prev = json.loads(out.read_text()).get("async_speed") if out.exists() else None
    if prev:  # earlier runs stay on record, in brief: the figure is noisy on a shared machine
        brief = {k: prev.get(k) for k in ("command", "iteration_s_median", "speedup_sync_over_async",
                                          "speedup_sync_over_async_one_worker")}
        brief["loadavg_before"] = prev.get("machine", {}).get("loadavg_before")
        section["earlier_runs"] = [*prev.get("earlier_runs", []), brief]
    update_results(out, "async_speed", section)  # other sections (scale_grid) live beside it
    print(json.dumps({"iteration_s_median": medians, **{k: v for k, v in section.items() if k.startswith("speedup")}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
