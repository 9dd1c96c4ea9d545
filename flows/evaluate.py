"""Held-out evaluation of a trained run, Prefect-free: used by the flow's `evaluate` task and by the
DVC `evaluate` stage (`python -m flows.evaluate --params params.yaml`).

Greedy rollouts of the final checkpoint ("rl") and of the run's starting point ("start": the SFT warm
start the RL began from) on the held-out question file, `train.eval_size` questions (numbers the
trainer measured on exactly those questions at step 0 and at the end are reused). Writes
`{train.out_dir}/eval_metrics.json`: {dataset: {model: {em, f1, substring_em, ...}}}.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _trainer_evals(cfg: Any, checkpoint: Path, n: int) -> dict[str, dict[str, float]]:
    """The trainer already rolled out the start (step 0) and final policy greedily on these very
    questions (same file, size, seed and rollout config): reuse those numbers rather than
    recomputing them. Empty when they do not cover exactly this evaluation."""
    from agent_r1.training.metrics_log import read_metrics

    rows = {r["step"]: r for r in read_metrics(Path(cfg.train.out_dir) / "metrics.jsonl") if "eval/em" in r}
    final_step = int(checkpoint.name.split("_")[-1]) if checkpoint.name.startswith("iter_") else -1
    found = {}
    for label, step in (("start", 0), ("rl", final_step)):
        row = rows.get(step)
        if row and row.get("eval/n") == n:
            found[label] = {k[len("eval/"):]: v for k, v in row.items() if k.startswith("eval/")}
    return found if len(found) == 2 else {}


def evaluate_run(cfg: Any, checkpoint: str | Path | None = None, log: Callable[[str], None] = print,
                 reuse: bool = True) -> dict[str, dict[str, dict[str, float]]]:
    from agent_r1.evaluation.agent_eval import evaluate_policy
    from agent_r1.models.build import load_model
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engine import TransformersEngine
    from agent_r1.runs.assembly import (
        ensure_data,
        ensure_index,
        load_samples,
        make_env_factory,
        open_run_index,
        set_threads,
    )
    from agent_r1.training import checkpoint as ckpt

    set_threads(cfg.train.threads)
    out = Path(cfg.train.out_dir)
    checkpoint = checkpoint or ckpt.latest_checkpoint(out / "checkpoints")
    if checkpoint is None:
        raise FileNotFoundError(f"no checkpoint in {out / 'checkpoints'}; train first")
    models = {"rl": str(checkpoint)}
    if (out / "init_model").exists():
        models["start"] = str(out / "init_model")
    data_dir = ensure_data(cfg)
    retriever = open_run_index(cfg, ensure_index(cfg, data_dir))
    datasets = {Path(cfg.data.eval_file).stem: data_dir / cfg.data.eval_file}
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        env_factory = make_env_factory(cfg, retriever)
        for name, path in datasets.items():
            samples = load_samples(path, cfg.train.eval_size, cfg=cfg)
            known = (_trainer_evals(cfg, Path(checkpoint), len(samples))
                     if reuse and path == data_dir / cfg.data.eval_file else {})
            for label, m in known.items():
                results.setdefault(name, {})[label] = {**m, "n": float(len(samples)), "source": "trainer"}
                log(f"{label} on {name} ({len(samples)} questions, measured by the trainer): EM {m['em']:.1f} "
                    f"F1 {m['f1']:.1f} search-first {m['search_first_rate']:.0f}%")
            for label, model_dir in models.items():
                if label in known:
                    continue
                model, tok = load_model(model_dir)
                m = evaluate_policy(TransformersEngine(model, tok), ChatCodec(tok), env_factory, samples,
                                    cfg.rollout, cfg.reward, greedy=True, seed=cfg.seed)
                results.setdefault(name, {})[label] = {**m, "n": float(len(samples))}
                log(f"{label} on {name} ({len(samples)} questions): EM {m['em']:.1f} F1 {m['f1']:.1f} "
                    f"search-first {m['search_first_rate']:.0f}%")
    finally:
        retriever.close()
    (out / "eval_metrics.json").write_text(json.dumps(results, indent=1))
    return results


CURVES = {
    "train.json": ("metrics.jsonl", ["reward_mean", "reward_std", "em", "f1", "search_first_rate",
                                     "turns_per_trajectory", "policy_loss", "entropy"]),
    "eval.json": ("metrics.jsonl", ["eval/em", "eval/f1", "eval/search_first_rate"]),
    "sft.json": (None, ["sft/loss"]),
}


def write_curves(cfg: Any) -> Path:
    """`{train.out_dir}/plots/{train,eval,sft}.json`: per-step curves in a format `dvc plots` reads
    (a JSON list of rows; JSONL is not one). Keys keep their names with '/' -> '_'."""
    from agent_r1.training.metrics_log import read_metrics

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

    p = argparse.ArgumentParser(prog="python -m flows.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--checkpoint", default=None, help="default: the latest in train.out_dir/checkpoints")
    p.add_argument("--fresh", action="store_true", help="roll out again even where the trainer measured it")
    args = p.parse_args(argv)
    cfg = load_config(args.params, parse_overrides(args.overrides))
    if not cfg.train.out_dir:
        raise SystemExit("name the run to evaluate: --set train.out_dir=RUN_FOLDER (`agent-r1 runs` lists them)")
    evaluate_run(cfg, args.checkpoint, reuse=not args.fresh)
    write_curves(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
