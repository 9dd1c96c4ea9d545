"""A run's held-out evaluation (`Run.evaluate`): the flow's `evaluate` task, DVC's `evaluate` stage
(`python -m flows.evaluate`) and `agent-r1 eval` all score through evaluation/harness.py.

Greedy rollouts of the final checkpoint ("rl") and of the run's starting point ("start": the model the
RL began from, the folder's init_model/) on the held-out question file, `train.eval_size` questions
(numbers the trainer measured on exactly those questions at step 0 and at the end are reused).
Writes `<run folder>/eval_metrics.json`: {dataset: {model: {em, f1, substring_em, ...}}}.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def trainer_evals(run: Any, checkpoint: Path, n: int) -> dict[str, dict[str, float]]:
    """The trainer already rolled out the start (step 0) and final policy greedily on these very
    questions (same file, size, seed and rollout config): reuse those numbers rather than
    recomputing them. Empty when they do not cover exactly this evaluation."""
    from agent_r1.training.metrics_log import read_metrics

    rows = {r["step"]: r for r in read_metrics(run.folder / "metrics.jsonl") if "eval/em" in r}
    final_step = int(checkpoint.name.split("_")[-1]) if checkpoint.name.startswith("iter_") else -1
    found = {}
    for label, step in (("start", 0), ("rl", final_step)):
        row = rows.get(step)
        if row and row.get("eval/n") == n:
            found[label] = {k[len("eval/"):]: v for k, v in row.items() if k.startswith("eval/")}
    return found if len(found) == 2 else {}


def evaluate_run(run: Any, checkpoint: str | Path | None = None, log: Callable[[str], None] = print,
                 reuse: bool = True) -> dict[str, dict[str, dict[str, float]]]:
    from agent_r1.evaluation.harness import evaluate_model
    from agent_r1.runs.assembly import set_threads
    from agent_r1.training import checkpoint as ckpt

    cfg, out = run.cfg, run.folder
    set_threads(cfg.train.threads)
    checkpoint = checkpoint or ckpt.latest_checkpoint(out / "checkpoints")
    if checkpoint is None:
        raise FileNotFoundError(f"no checkpoint in {out / 'checkpoints'}; train first")
    models = {"rl": str(checkpoint)}
    if (out / "init_model").exists():
        models["start"] = str(out / "init_model")
    name = Path(cfg.data.eval_file).stem
    samples = run.eval_samples
    results: dict[str, dict[str, dict[str, float]]] = {name: {}}
    known = trainer_evals(run, Path(checkpoint), len(samples)) if reuse else {}
    for label, m in known.items():
        results[name][label] = {**m, "n": float(len(samples)), "source": "trainer"}
        log(f"{label} on {name} ({len(samples)} questions, measured by the trainer): EM {m['em']:.1f} "
            f"F1 {m['f1']:.1f} search-first {m['search_first_rate']:.0f}%")
    try:
        for label, model_dir in models.items():
            if label in known:
                continue
            report = evaluate_model(model_dir, cfg, {name: samples}, ["agent"], retriever=run.retriever,
                                    device=cfg.train.device)
            m = report["results"]["agent"][name]
            results[name][label] = {**m, "n": float(len(samples))}
            log(f"{label} on {name} ({len(samples)} questions): EM {m['em']:.1f} F1 {m['f1']:.1f} "
                f"search-first {m['search_first_rate']:.0f}%")
    finally:
        run.close()
    (out / "eval_metrics.json").write_text(json.dumps(results, indent=1))
    return results
