"""Seconds per training iteration against rollout workers (1, 2) and learners (1, 2).

Four cells, one config: `ray.num_workers` x `ray.num_learners`, synchronous (max_staleness 0, so
rollout and update do not overlap and each axis speeds up one phase), one torch thread and one
logical CPU per worker and per learner, the small config of ray_bench_common. Each run is a fresh
Ray trainer (start-up not timed): one warm-up iteration, then `--iterations` timed ones. Every
repeat runs the four cells once, in an order rotated by one each repeat, so load that drifts on a
shared machine falls on every cell alike; the load average is recorded before and after each run.

Reported per cell: the median over repeats of each run's mean seconds per iteration, the range
(min, max) of those means, the medians of the rollout wait and of the update, and the speed-up
over 1 worker x 1 learner as the median of per-repeat ratios. Work per iteration is close, not
equal: the prompts are the same, but each worker samples its shard with that shard's seed, so two
workers draw other tokens than one (`batch_tokens` per iteration is kept to show it).

Writes benchmarks/results/scale.json key "scale_grid" (other keys kept) and draws
docs/img/bench-scale-grid.png.

    python -m benchmarks.scale_grid                       # about 10 minutes on 2 busy cores
    python -m benchmarks.scale_grid --repeats 2 --iterations 2
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_r1.config import load_config
from benchmarks.common import ROOT, loadavg, result_path, update_results, work_dir
from benchmarks.ray_bench_common import add_smoke_arg, prepare_world, ray_machine, small_config, timed_ray_run


def config(work: Path, smoke: bool = False) -> dict[str, Any]:
    return small_config(work, smoke, **{
        "train.threads": 1, "train.iterations": 1000, "train.checkpoint_every": 1000, "ray.enabled": True,
        "ray.cpus_per_worker": 1, "ray.learner_cpus": 1,
    })


CELLS = [(w, n) for n in (1, 2) for w in (1, 2)]  # (rollout workers, learners)
PLOT = ROOT / "docs" / "img" / "bench-scale-grid.png"


def cell_name(workers: int, learners: int) -> str:
    return f"{workers}w_{learners}l"


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    base = cell_name(1, 1)  # speed-ups need it: a run without it has none
    out: dict[str, Any] = {"iteration_s_median": {}, "iteration_s_range": {}, "rollout_wait_s_median": {},
                           "update_s_median": {}, "speedup_over_1w_1l_paired_median": {}}
    for name, rs in runs.items():
        means = [r["iteration_s_mean"] for r in rs]
        out["iteration_s_median"][name] = round(statistics.median(means), 4)
        out["iteration_s_range"][name] = [min(means), max(means)]
        out["rollout_wait_s_median"][name] = round(statistics.median(x for r in rs for x in r["rollout_wait_s"]), 4)
        out["update_s_median"][name] = round(statistics.median(x for r in rs for x in r["update_s"]), 4)
        if runs.get(base):
            out["speedup_over_1w_1l_paired_median"][name] = round(statistics.median(
                b["iteration_s_mean"] / r["iteration_s_mean"] for b, r in zip(runs[base], rs)), 3)
    return out


def plot(section: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax_phase) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    medians, ranges, runs = section["iteration_s_median"], section["iteration_s_range"], section["runs"]
    for i, learners in enumerate((1, 2)):
        xs = [int(n[0]) + (i - 0.5) * 0.06 for n in (cell_name(w, learners) for w in (1, 2))
              if n in medians]  # a nudge, so the two ranges do not hide each other
        names = [cell_name(w, learners) for w in (1, 2) if cell_name(w, learners) in medians]
        if not names:
            continue
        ys = [medians[n] for n in names]
        err = [[y - ranges[n][0] for n, y in zip(names, ys)], [ranges[n][1] - y for n, y in zip(names, ys)]]
        ax.errorbar(xs, ys, yerr=err, fmt="-o", capsize=4, color=f"C{i}",
                    label=f"{learners} learner{'s' if learners > 1 else ''} (median; bar: range of repeats)")
        for x, n in zip(xs, names):
            ax.plot([x] * len(runs[n]), [r["iteration_s_mean"] for r in runs[n]], ".", color=f"C{i}", alpha=0.5)
            ax.annotate(f"{medians[n]:.2f}", (x, medians[n]), textcoords="offset points", xytext=(8, -3), fontsize=8)
    ax.set_xticks([1, 2], ["1 worker", "2 workers"])
    ax.set(ylabel="seconds per iteration", title="Seconds per iteration (synchronous)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    cells = [(w, n) for w, n in CELLS if cell_name(w, n) in medians]
    names = [cell_name(w, n) for w, n in cells]
    rollout = [section["rollout_wait_s_median"][n] for n in names]
    update = [section["update_s_median"][n] for n in names]
    ax_phase.bar(range(len(names)), rollout, label="rollout (driver's wait)", color="C2", alpha=0.8)
    ax_phase.bar(range(len(names)), update, bottom=rollout, label="update", color="C3", alpha=0.8)
    ax_phase.set_xticks(range(len(names)), [f"{w} w\n{n} l" for w, n in cells])
    ax_phase.set(ylabel="seconds (medians)", title="Where an iteration goes")
    ax_phase.grid(axis="y", alpha=0.3)
    ax_phase.legend(fontsize=8)
    load = [x for rs in runs.values() for r in rs for x in (r["loadavg_before"][0], r["loadavg_after"][0])]
    fig.suptitle(f"Rollout workers x learners on {section['machine']['cores']} shared cores "
                 f"(1-min load average {min(load):.1f}-{max(load):.1f}; {section['repeats']} alternated repeats)\n"
                 f"`{section['command']}`", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=3, help="timed iterations per run (after one warm-up)")
    ap.add_argument("--repeats", type=int, default=4, help="runs per cell; each repeat runs every cell once")
    ap.add_argument("--out", default=str(result_path("scale")))
    ap.add_argument("--plot", default=str(PLOT))
    ap.add_argument("--cells", default=",".join(f"{w}x{n}" for w, n in CELLS),
                    help="comma list of WORKERSxLEARNERS (default: all four)")
    add_smoke_arg(ap)
    args = ap.parse_args(argv)
    cells = [tuple(int(x) for x in c.split("x")) for c in args.cells.split(",")]
    WORK = work_dir("scale_grid")
    CONFIG = config(WORK, args.smoke)

    import ray

    from agent_r1.training.ray_trainer import init_ray

    base = prepare_world(CONFIG, WORK)
    load_before = loadavg()
    # logical CPUs for the largest cell (2 workers + 2 learners): they take turns, rollout then update
    owned = init_ray(replace(base.ray, num_cpus=4))
    runs: dict[str, list[dict[str, Any]]] = {cell_name(w, n): [] for w, n in cells}
    try:
        for r in range(args.repeats):
            for w, n in cells[r % len(cells):] + cells[:r % len(cells)]:
                name = cell_name(w, n)
                cfg = load_config(None, {**CONFIG, "ray.num_workers": w, "ray.num_learners": n,
                                         "train.out_dir": str(WORK / f"{name}_{r}")})
                before = loadavg()
                run = {"repeat": r, "loadavg_before": before, **timed_ray_run(cfg, args.iterations),
                       "loadavg_after": loadavg()}
                runs[name].append(run)
                print(f"repeat {r} {name}: {run['iteration_s_mean']:.2f} s/iter (waits {run['rollout_wait_s']}, "
                      f"updates {run['update_s']}; load {before[0]} -> {run['loadavg_after'][0]})", flush=True)
    finally:
        if owned:  # a caller's Ray session (the smoke tests') stays up
            ray.shutdown()
    section = {
        "what": "seconds per training iteration against ray.num_workers (1, 2) and ray.num_learners (1, 2), "
                "synchronous, same config and seed: median over repeats of each run's mean over timed iterations "
                "(after one warm-up); cells alternated within each repeat",
        "command": f"python -m benchmarks.scale_grid --iterations {args.iterations} --repeats {args.repeats}",
        "config": CONFIG, "cells": {cell_name(w, n): {"ray.num_workers": w, "ray.num_learners": n} for w, n in cells},
        "iterations_timed": args.iterations, "repeats": args.repeats,
        **summarise(runs), "runs": runs,
        "caveats": "2 cores shared with other engineers' benchmarks and tests (see each run's load average): "
                   "a cell of 2 workers or 2 learners needs both cores free to gain. Work is close, not equal: "
                   "2 workers sample their shards with per-shard seeds (batch_tokens). Learners split every "
                   "mini-batch's rows, and each rank still computes the whole batch's advantages.",
        "machine": {**ray_machine(), "loadavg_before": load_before, "loadavg_after": loadavg()},
    }
    update_results(Path(args.out), "scale_grid", section)  # beside async_speed's section
    print(f"wrote {args.out} (scale_grid) and {plot(section, Path(args.plot))}")
    print(json.dumps({k: section[k] for k in ("iteration_s_median", "iteration_s_range",
                                              "speedup_over_1w_1l_paired_median")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
