"""The trainer's metrics sink: per-iteration metrics, trajectory tables and checkpoints to MLflow."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_r1.tracking.rows import trajectory_rows
from agent_r1.tracking.run import RunTracker


class MlflowSink:
    """A MetricsSink for `run_train(..., sink=)`: per-iteration metrics and trajectory tables to an
    MLflow run, checkpoints as artifacts; `also` sinks (e.g. the JSONL file DVC plots) get every
    metric too."""

    def __init__(self, tracker: RunTracker, also: Iterable[Any] = (), checkpoints_dir: str | Path | None = None,
                 max_table_rows: int | None = 64):
        self.tracker = tracker
        self.also = list(also)
        self.checkpoints_dir = Path(checkpoints_dir) if checkpoints_dir else None
        self.max_table_rows = max_table_rows
        self.logged_checkpoints: set[str] = set()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for sink in self.also:
            sink.log(step, metrics)
        self.tracker.log_metrics(metrics, step)

    def log_trajectories(self, step: int, trajectories: list[Any], tokenizer: Any = None) -> None:
        rows = trajectory_rows(step, trajectories, tokenizer=None, max_rows=self.max_table_rows)
        self.tracker.log_table(rows, f"trajectories/iter_{step:06d}.json")
        for sink in self.also:
            if hasattr(sink, "log_trajectories"):
                sink.log_trajectories(step, trajectories, tokenizer)

    def log_checkpoints(self) -> list[str]:
        """Uploads every complete checkpoint not uploaded yet (as `checkpoints/iter_XXXXXX`)."""
        if self.checkpoints_dir is None or not self.checkpoints_dir.exists():
            return []
        new = []
        for path in sorted(self.checkpoints_dir.glob("iter_*")):
            if path.name not in self.logged_checkpoints and (path / "state.pt").exists():
                self.tracker.log_artifacts(path, f"checkpoints/{path.name}")
                self.logged_checkpoints.add(path.name)
                new.append(path.name)
        return new
