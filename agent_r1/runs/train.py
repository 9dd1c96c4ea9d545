"""A run opened and trained in one call (agent_r1/runs/run.py): what tests and benchmarks call."""

from __future__ import annotations

from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.runs.run import Run


def run_train(cfg: ExperimentConfig, resume: bool = False, sink: Any = None,
              on_iteration: Any = None, allow_config_change: bool = False) -> dict[str, Any]:
    """`Run.open(cfg, resume).train(...)`. Trains from `train.init_from` (a folder, `sft` = the
    matching warm start, or empty = a fresh model) into the run's own folder (a new one unless
    `train.out_dir` pins it); with `resume`, continues from the latest complete checkpoint in
    `train.out_dir`. Returns the result (final metrics, folder, checkpoint and its hash)."""
    run = Run.open(cfg, resume, allow_config_change=allow_config_change)
    print(f"run folder: {run.folder}", flush=True)
    return run.train(sink=sink, on_iteration=on_iteration)
