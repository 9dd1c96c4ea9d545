"""The training loop over any backend, and two helpers it and the Ray layer share.

`fit_loop` drives a `TrainingBackend` (the in-process `RLTrainer` or the Ray `RayTrainer`):
iterations with evaluation, logging and checkpoints on schedule. Kept apart from the trainer so
the trainer holds only the iteration's arithmetic.

A full disk (ENOSPC, or a spent quota) anywhere in an iteration (a checkpoint, a metrics row, the
MLflow buffer, the run's card) stops the loop with DiskFullError: which folder, and that the run
resumes from its last checkpoint once there is space. Carrying on would lose every iteration's
checkpoint and metrics while the run seemed to train.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from agent_r1.config import ExperimentConfig
from agent_r1.training.checkpoint import DiskFullError, is_disk_full
from agent_r1.tracking.metrics import MetricsSink


def log_finite(sink: MetricsSink | None, step: int, metrics: dict[str, float]) -> None:
    if sink is not None and metrics:
        sink.log(step, {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)})


def rollout_seed(seed: int, iteration: int, shard: int = 0, round: int = 0) -> int:
    """The rollout seed of one shard of one iteration. Shard 0 is the whole batch of the
    in-process trainer, so one Ray worker reproduces it exactly; other shards are offset far
    enough that no (iteration, shard) pair shares a seed with another. `round`: dynamic sampling's
    extra rollouts of an iteration (training/dynamic_sampling.py; 0 = the iteration's own), offset
    past every shard's."""
    return seed * 1_000_003 + iteration + shard * 100_000_007 + round * 10_000_000_000_037


class TrainingBackend(Protocol):
    """What `fit_loop` drives: `RLTrainer` in-process, or `RayTrainer` over Ray actors."""

    cfg: ExperimentConfig
    iteration: int
    eval_samples: list[dict[str, Any]]

    def train_step(self) -> dict[str, float]: ...
    def evaluate(self, greedy: bool = True) -> dict[str, float]: ...
    def save(self) -> Path: ...
    def _log(self, step: int, metrics: dict[str, float]) -> None: ...


def fit_loop(trainer: TrainingBackend, on_iteration: Any = None) -> dict[str, float]:
    """Iterations with evaluation, logging and checkpoints on schedule; returns the final metrics.
    A full disk raises DiskFullError naming the folder and the run to resume."""
    run = trainer.cfg.train.out_dir or None
    try:
        return _iterations(trainer, on_iteration)
    except Exception as raised:
        # a Ray learner's error comes wrapped (RayTaskError(OSError)): its `cause` is what happened
        err = getattr(raised, "cause", None) if isinstance(getattr(raised, "cause", None), Exception) else raised
        if isinstance(err, DiskFullError):  # a checkpoint save: it knows its folder, not the run
            raise DiskFullError(err.folder, run) from (err.__cause__ if err is raised else raised)
        if not is_disk_full(err):
            raise
        folders = _written_folders(err, trainer)
        raise DiskFullError(folders[0], run, where=" or ".join(map(str, folders))) from raised


def _written_folders(err: OSError, trainer: TrainingBackend) -> list[Path]:
    """Where the failed write went: the error's file, else every folder the metrics sinks write to
    (an MLflow buffer's append names no file), else the run folder."""
    if err.filename:
        return [Path(err.filename).parent]
    found: list[Path] = []
    todo = [getattr(trainer, "sink", None)]
    while todo:
        sink = todo.pop(0)
        buffer = getattr(getattr(getattr(sink, "tracker", None), "channel", None), "buffer", None)
        for folder in (getattr(buffer, "root", None), getattr(getattr(sink, "path", None), "parent", None)):
            if isinstance(folder, Path) and folder not in found:
                found.append(folder)
        todo.extend(getattr(sink, "also", ()))
    return found or [Path(trainer.cfg.train.out_dir or ".")]


def _iterations(trainer: TrainingBackend, on_iteration: Any) -> dict[str, float]:
    t = trainer.cfg.train
    final: dict[str, float] = {}
    if trainer.iteration == 0 and trainer.eval_samples:
        trainer._log(0, {f"eval/{k}": v for k, v in trainer.evaluate().items()})
    while trainer.iteration < t.iterations:
        metrics = trainer.train_step()
        if t.eval_every and trainer.iteration % t.eval_every == 0 and trainer.iteration < t.iterations:
            metrics.update({f"eval/{k}": v for k, v in trainer.evaluate().items()})
        if trainer.iteration == t.iterations:
            metrics.update({f"eval/{k}": v for k, v in trainer.evaluate().items()})
            final = metrics
        trainer._log(trainer.iteration, metrics)
        if on_iteration is not None:
            on_iteration(trainer.iteration, metrics)
        if trainer.iteration % t.checkpoint_every == 0 or trainer.iteration == t.iterations:
            trainer.save()
    return final
