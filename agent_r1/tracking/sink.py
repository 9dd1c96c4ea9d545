"""The trainer's metrics sink: per-iteration metrics, trajectory tables and traces, checkpoints to MLflow."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_r1.tracking.run import RunTracker
from agent_r1.tracking.traces import trajectory_rows


def manifest_files(checkpoint: Path) -> list[str] | None:
    """The files a checkpoint's manifest.json lists (its `sizes`) and the manifest itself: what was written
    as the checkpoint, so a file dropped in later stays local. None without a readable manifest: then
    the folder's regular files are all sent."""
    try:
        listed = json.loads((checkpoint / "manifest.json").read_text())["sizes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sorted({*map(str, listed), "manifest.json"}) if isinstance(listed, dict) else None


class MlflowSink:
    """A MetricsSink for `run_train(..., sink=)`: per-iteration metrics, trajectory tables and traces to an
    MLflow run, checkpoints as artifacts; `also` sinks (e.g. the run folder's metrics.jsonl, which DVC
    plots) get every metric too. Each logged iteration's first `max_traces` table rows also become traces
    (a trace costs a few store writes, so they stay few; None: as many as the table rows, 0: none)."""

    def __init__(self, tracker: RunTracker, also: Iterable[Any] = (), checkpoints_dir: str | Path | None = None,
                 max_table_rows: int | None = 64, max_traces: int | None = 16):
        self.tracker, self.also = tracker, list(also)
        self.checkpoints_dir = Path(checkpoints_dir) if checkpoints_dir else None
        self.max_table_rows, self.max_traces = max_table_rows, max_traces
        self.logged_checkpoints: set[str] = set()  # checkpoint folder names uploaded (or not to upload)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for sink in self.also:
            sink.log(step, metrics)
        self.tracker.log_metrics(metrics, step)

    def log_trajectories(self, step: int, trajectories: list[Any], tokenizer: Any = None) -> None:
        rows = trajectory_rows(step, trajectories, tokenizer=None, max_rows=self.max_table_rows)
        self.tracker.log_table(rows, f"trajectories/iter_{step:06d}.json")
        self.log_traces(step, trajectories)
        for sink in self.also:
            if hasattr(sink, "log_trajectories"):
                sink.log_trajectories(step, trajectories, tokenizer)

    def log_traces(self, step: int, trajectories: list[Any]) -> int:
        """The first trajectories (those in the table, at most `max_traces`) as traces; returns how many."""
        # the table reads a max_table_rows of 0 as "no limit"; max_traces=0 means no traces
        limits = [n for n in (self.max_table_rows or None, self.max_traces) if n is not None]
        chosen = trajectories[:min(limits)] if limits else trajectories
        for index, traj in enumerate(chosen):
            self.tracker.log_trace(step, index, traj)
        return len(chosen)

    def log_checkpoints(self) -> list[str]:
        """Uploads every complete checkpoint not uploaded yet (as `checkpoints/iter_XXXXXX`)."""
        if self.checkpoints_dir is None or not self.checkpoints_dir.exists():
            return []
        new = []
        for path in sorted(self.checkpoints_dir.glob("iter_*")):
            if path.name not in self.logged_checkpoints and (path / "state.pt").exists():
                self.tracker.log_artifacts(path, f"checkpoints/{path.name}", files=manifest_files(path))
                self.logged_checkpoints.add(path.name)
                new.append(path.name)
        return new
