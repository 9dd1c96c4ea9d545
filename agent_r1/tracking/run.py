"""One MLflow run (optionally the child of another), safe to use while MLflow is down (adapter.py);
the trainer's sink over it (MlflowSink); where records go; `python -m agent_r1.tracking flush|status`."""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_r1.redaction import redact_secrets, redact_uri
from agent_r1.tracking.adapter import MlflowAdapter
from agent_r1.tracking.tags import flatten_params, project_dir
from agent_r1.tracking.traces import rows_to_columns, trace_record, trajectory_rows

DEFAULT_EXPERIMENT = "agent-r1"
CLOSE_FLUSH_WAIT_S = 60.0  # how long `close()` waits for another process's flush of the same buffer


def locations(tracking_uri: str | None = None, buffer_dir: str | Path | None = None) -> tuple[str, str, Path]:
    """(tracking URI, artifact root, buffer folder): `MLFLOW_TRACKING_URI`, else a SQLite store
    `<project>/mlruns/mlflow.db` (MLflow 3's file store is in maintenance mode) with the artifacts of
    experiments made here beside it (a server decides its own); `AGENT_R1_MLFLOW_BUFFER`, else
    `<project>/mlruns/buffer`."""
    project = project_dir()
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{project / 'mlruns' / 'mlflow.db'}"
    store = Path(uri[len("sqlite:///"):]).parent if uri.startswith("sqlite:///") else None
    if store is not None:
        store.mkdir(parents=True, exist_ok=True)
    artifacts = (store / "artifacts").resolve() if store is not None else project / "mlruns" / "artifacts"
    buffer = buffer_dir or os.environ.get("AGENT_R1_MLFLOW_BUFFER") or project / "mlruns" / "buffer"
    return uri, artifacts.as_uri(), Path(buffer)


class RunTracker:
    """One MLflow run (optionally the child of another). Every method is safe to call while MLflow is
    down: writes are buffered and flushed later, and the run id becomes known once MLflow answers."""

    def __init__(self, name: str, experiment: str = DEFAULT_EXPERIMENT, tags: dict[str, str] | None = None,
                 tracking_uri: str | None = None, buffer_dir: str | Path | None = None,
                 parent: RunTracker | None = None, verbose: bool = True):
        if parent is not None:
            self.mlflow, experiment = parent.mlflow, parent.experiment
        else:
            self.mlflow = MlflowAdapter(*locations(tracking_uri, buffer_dir), verbose)
        self.experiment, self.key, self.closed = experiment, uuid.uuid4().hex, False
        self.mlflow.submit({"op": "create_run", "key": self.key, "name": name, "experiment": experiment,
                            "tags": _texts(tags), "parent_key": parent.key if parent else None,
                            "time_ms": _now_ms()})

    @property
    def run_id(self) -> str | None:
        """The MLflow run id, or None while the run exists only in the buffer."""
        return self.mlflow.known_run(self.key)

    @property
    def tracking_uri(self) -> str:
        """The URI as given (it may hold credentials: show `display_uri` instead)."""
        return self.mlflow.tracking_uri

    @property
    def display_uri(self) -> str:
        return redact_uri(self.tracking_uri)

    def child(self, name: str, tags: dict[str, str] | None = None) -> RunTracker:
        return RunTracker(name, tags=tags, parent=self)

    def log_params(self, params: dict[str, Any]) -> None:
        if params:
            self.mlflow.submit({"op": "params", "key": self.key, "params": _texts(params)})

    def log_config(self, config: dict[str, Any]) -> None:
        """The config as params, its secrets hidden (redaction.py): the run keeps the real values."""
        self.log_params(flatten_params(redact_secrets(config)))

    def set_tags(self, tags: dict[str, Any]) -> None:
        if tags:
            self.mlflow.submit({"op": "tags", "key": self.key, "tags": _texts(tags)})

    def log_metrics(self, metrics: dict[str, Any], step: int = 0) -> None:
        clean = {k: float(v) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        if clean:
            self.mlflow.submit({"op": "metrics", "key": self.key, "step": int(step), "metrics": clean,
                                "time_ms": _now_ms()})

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        if rows:
            self.mlflow.submit({"op": "table", "key": self.key, "columns": rows_to_columns(rows),
                                "artifact_file": artifact_file})

    def log_trace(self, step: int, index: int, trajectory: Any) -> None:
        """One trajectory as an MLflow trace linked to this run (traces.py)."""
        self.mlflow.submit(trace_record(self.key, self.experiment, step, index, trajectory))

    def log_artifacts(self, local_path: str | Path, artifact_path: str | None = None,
                      files: list[str] | None = None) -> None:
        """A file, or a folder's regular files (links are never followed); `files`: only these of them."""
        record = {"op": "artifacts", "key": self.key, "local_path": str(local_path), "artifact_path": artifact_path}
        self.mlflow.submit({**record, "files": list(files)} if files is not None else record)

    def log_dict(self, data: dict[str, Any], artifact_file: str) -> None:
        """A small JSON artifact (e.g. final metrics)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(artifact_file).name
            path.write_text(json.dumps(data, indent=1, default=str))
            parent = str(Path(artifact_file).parent)
            self.log_artifacts(path, None if parent == "." else parent)

    def end(self, status: str = "FINISHED") -> None:
        if not self.closed:
            self.closed = True
            self.mlflow.submit({"op": "end", "key": self.key, "status": status, "time_ms": _now_ms()})

    def flush(self) -> bool:
        return self.mlflow.flush()

    def report(self) -> dict[str, Any]:
        return self.mlflow.report()

    def close(self, status: str = "FINISHED") -> dict[str, Any]:
        """Ends the run, tries one last flush and says what was sent, buffered or is still pending."""
        self.end(status)
        self.mlflow.flush(wait_s=CLOSE_FLUSH_WAIT_S)
        rep = self.report()
        if rep["pending"] or rep["rejected"]:
            self.mlflow.warn(f"{rep['pending']} record(s) still buffered in {rep['buffer']} ({rep['rejected']} "
                             f"rejected); run `python -m agent_r1.tracking flush` when MLflow is reachable")
        return rep

    def ui_hint(self) -> str:
        if self.tracking_uri.startswith("http"):
            return f"open {redact_uri(self.tracking_uri)} in a browser"
        return "run `make ui` (or infra/mlflow/server.sh) and open http://127.0.0.1:5000"


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

    def folders(self) -> list[Path]:
        """The MLflow buffer's folder (a buffered append names no file), then the `also` sinks'."""
        return [self.tracker.mlflow.buffer.root, *(f for s in self.also if hasattr(s, "folders") for f in s.folders())]

    def log_trajectories(self, step: int, trajectories: list[Any], tokenizer: Any = None) -> None:
        """A table of the iteration's first trajectories, and traces of some (the text is the model's own:
        `tokenizer` is not needed)."""
        rows = trajectory_rows(step, trajectories, max_rows=self.max_table_rows)
        self.tracker.log_table(rows, f"trajectories/iter_{step:06d}.json")
        self.log_traces(step, trajectories)

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


def _texts(values: dict[str, Any] | None) -> dict[str, str]:
    """Param and tag values as MLflow stores them (text), so a caller's int or None passes the shape check."""
    return {str(k): str(v) for k, v in (values or {}).items()}


def _now_ms() -> int:
    return int(time.time() * 1000)


def main(argv: list[str] | None = None) -> int:
    """`python -m agent_r1.tracking flush|status`: send or show what the buffer holds."""
    p = argparse.ArgumentParser(prog="python -m agent_r1.tracking", description="the MLflow record buffer")
    p.add_argument("action", choices=["flush", "status"])
    p.add_argument("--buffer", default=None, help="buffer folder (default <project>/mlruns/buffer)")
    p.add_argument("--tracking-uri", default=None)
    args = p.parse_args(argv)
    adapter = MlflowAdapter(*locations(args.tracking_uri, args.buffer))
    # flush: another process flushing this buffer is waited for, then this one goes on
    ok = adapter.flush(wait_s=None) if args.action == "flush" else True
    print(json.dumps(adapter.report(), indent=1))
    return 0 if ok else 1
