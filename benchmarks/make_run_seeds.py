"""`make run` over seeds: does the default recipe lift held-out EM on every seed, not on a lucky one?

Each seed runs exactly what `make run` runs (the `train-agent` Prefect flow on params.yaml), with
only `seed` changed and the seed's world, index and runs kept in a folder of its own
(benchmarks/.work/make_run/seed<N>), so seeds never share or overwrite anything: each seed is its
own world, its own SFT warm start and its own RL run. Per seed it records the flow's summary
(warm-start and final held-out greedy EM, wall time) and the RL curve (reward, entropy,
search-first rate per iteration, from the run folder's metrics.jsonl); across seeds, the lift's
mean, minimum and a 95% Student-t interval over seeds. Writes benchmarks/results/make_run_seeds.json
(`--out` for a probe); a seed already in the file with the same recipe is kept, so an interrupted
benchmark continues where it stopped.

    python -m benchmarks.make_run_seeds --seeds 0,1,2,3,4     # the README's figure (~35 min on 2 idle cores)
    python -m benchmarks.make_run_seeds --seeds 3 --set train.lr=1e-4 --out /tmp/probe.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.common import ROOT, machine, result_path, work_dir, write_json

# two-sided 95% Student-t quantiles by degrees of freedom (1-10): 5 seeds have 4
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
CURVE_KEYS = ("reward_mean", "em", "entropy", "search_first_rate", "grad_norm", "clipfrac")


def seed_overrides(seed: int, work: Path) -> list[str]:
    """What differs from `make run`: the seed, and folders of the seed's own."""
    home = work / f"seed{seed}"
    return [f"seed={seed}", f"data.dir={home / 'data'}", f"search.index_dir={home / 'index'}",
            f"train.runs_dir={home / 'runs'}"]


def recipe_key(params: Path, extra: list[str]) -> str:
    """Identifies the recipe: the params file's values (parsed, so an edited comment is the same
    recipe) and any extra overrides."""
    values = yaml.safe_load(params.read_text())
    h = hashlib.sha256(json.dumps(values, sort_keys=True).encode())
    h.update(json.dumps(sorted(extra)).encode())
    return h.hexdigest()[:16]


def run_flow(cmd: list[str], env: dict[str, str]) -> None:
    """The train-agent flow for one seed, as `make run` runs it (tests replace this with a stand-in)."""
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)


def run_seed(seed: int, params: Path, extra: list[str], work: Path) -> dict:
    summary_file = work / f"seed{seed}" / "summary.json"
    summary_file.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "flows.train_agent", "--params", str(params), "--experiment", "make-run-seeds",
           "--summary", str(summary_file)]
    for kv in seed_overrides(seed, work) + extra:
        cmd += ["--set", kv]
    env = {**os.environ, "PREFECT_HOME": str(ROOT / ".prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300", "MLFLOW_DISABLE_TELEMETRY": "true",
           "DO_NOT_TRACK": "1"}
    start = time.perf_counter()
    run_flow(cmd, env)
    wall = time.perf_counter() - start
    summary = json.loads(summary_file.read_text())
    curve = []
    metrics = Path(summary["run_dir"]) / "metrics.jsonl"
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        if "reward_mean" in row:
            curve.append({"iteration": row["step"], **{k: row[k] for k in CURVE_KEYS if k in row}})
    return {"start_em": summary["start_em"], "final_em": summary["final_em"],
            "lift": summary["final_em"] - summary["start_em"], "eval_questions": summary["eval_questions"],
            "wall_s": round(wall, 1), "run_dir": summary["run_dir"], "curve": curve, "load_after": os.getloadavg()}


def summarise(per_seed: dict[str, dict]) -> dict:
    lifts = [r["lift"] for r in per_seed.values()]
    out = {"seeds": len(lifts), "lift_min": min(lifts), "lift_max": max(lifts),
           "lift_mean": statistics.fmean(lifts),
           "start_em_mean": statistics.fmean(r["start_em"] for r in per_seed.values()),
           "final_em_mean": statistics.fmean(r["final_em"] for r in per_seed.values()),
           "final_em_min": min(r["final_em"] for r in per_seed.values()),
           "wall_s_max": max(r["wall_s"] for r in per_seed.values())}
    if len(lifts) > 1:
        half = T975.get(len(lifts) - 1, 1.96) * statistics.stdev(lifts) / len(lifts) ** 0.5
        out["lift_ci95"] = {"low": out["lift_mean"] - half, "high": out["lift_mean"] + half}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a probe's extra override (the README's figure uses none)")
    ap.add_argument("--work", default=str(work_dir("make_run")))
    ap.add_argument("--out", default=str(result_path("make_run_seeds")))
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    params, work, out = Path(args.params), Path(args.work), Path(args.out)
    key = recipe_key(params, args.set)
    results = json.loads(out.read_text()) if out.exists() else {}
    if results.get("recipe_key") != key:
        results = {"recipe_key": key, "params": str(params), "overrides": args.set, "per_seed": {}}
    results["machine"] = machine()
    for seed in [int(s) for s in args.seeds.split(",")]:
        if str(seed) in results["per_seed"]:
            print(f"seed {seed}: kept from {out}", flush=True)
            continue
        row = run_seed(seed, params, args.set, work)
        results["per_seed"][str(seed)] = row
        results["summary"] = summarise(results["per_seed"])
        write_json(out, results)
        print(f"seed {seed}: held-out EM {row['start_em']:.0f} -> {row['final_em']:.0f} "
              f"(lift {row['lift']:+.0f}, {row['wall_s'] / 60:.1f} min)", flush=True)
    print(json.dumps(results.get("summary", {}), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
