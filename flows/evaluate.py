"""Held-out evaluation of a trained run, Prefect-free: the DVC `evaluate` stage
(`python -m flows.evaluate --params params.yaml --set train.out_dir=RUN`) and the curves `dvc plots`
reads. The evaluation itself is the run's (`Run.evaluate`, agent_r1/runs/run.py), the same one
the flow's `evaluate` task runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


CURVES = {
    "train.json": ("metrics.jsonl", ["reward_mean", "reward_std", "em", "f1", "search_first_rate",
                                     "turns_per_trajectory", "policy_loss", "entropy"]),
    "eval.json": ("metrics.jsonl", ["eval/em", "eval/f1", "eval/search_first_rate"]),
    "sft.json": (None, ["sft/loss"]),
}


def write_curves(run: Any) -> Path:
    """`{train.out_dir}/plots/{train,eval,sft}.json`: per-step curves in a format `dvc plots` reads
    (a JSON list of rows; JSONL is not one). Keys keep their names with '/' -> '_'."""
    from agent_r1.tracking.metrics import read_metrics

    cfg = run.cfg
    out = Path(cfg.train.out_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    sft = Path(cfg.sft.out_dir) / "metrics.jsonl" if cfg.sft.out_dir else Path(cfg.train.init_from).parent / "metrics.jsonl"
    sources = {"metrics.jsonl": Path(cfg.train.out_dir) / "metrics.jsonl", None: sft}
    for name, (source, keys) in CURVES.items():
        rows = []
        for row in read_metrics(sources[source]):
            if all(row.get(k) is not None for k in keys[:1]):
                rows.append({"step": row["step"], **{k.replace("/", "_"): row.get(k) for k in keys
                                                     if row.get(k) is not None}})
        (out / name).write_text(json.dumps(rows, indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    from agent_r1.config import load_config, parse_overrides
    from agent_r1.runs.run import Run

    p = argparse.ArgumentParser(prog="python -m flows.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--checkpoint", default=None, help="default: the latest in train.out_dir/checkpoints")
    p.add_argument("--fresh", action="store_true", help="roll out again even where the trainer measured it")
    args = p.parse_args(argv)
    cfg = load_config(args.params, parse_overrides(args.overrides))
    if not cfg.train.out_dir:
        raise SystemExit("name the run to evaluate: --set train.out_dir=RUN_FOLDER (`agent-r1 runs` lists them)")
    run = Run.load(cfg.train.out_dir)
    run.evaluate(args.checkpoint, reuse=not args.fresh)
    write_curves(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
