"""One MLflow run (optionally the child of another), safe to use while MLflow is down."""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path
from typing import Any

from agent_r1.tracking.channel import CLOSE_FLUSH_WAIT_S, _Channel
from agent_r1.tracking.location import (
    DEFAULT_EXPERIMENT,
    default_artifact_root,
    default_buffer_dir,
    default_tracking_uri,
    project_dir,
    redact_uri,
)
from agent_r1.tracking.rows import rows_to_columns
from agent_r1.tracking.redact import redact_secrets
from agent_r1.tracking.tags import flatten_params


class RunTracker:
    """One MLflow run (optionally the child of another). Every method is safe to call while MLflow is
    down: writes are buffered and flushed later, and the run id becomes known once MLflow answers."""

    def __init__(self, name: str, experiment: str = DEFAULT_EXPERIMENT, tags: dict[str, str] | None = None,
                 tracking_uri: str | None = None, buffer_dir: str | Path | None = None,
                 parent: "RunTracker | None" = None, verbose: bool = True):
        if parent is not None:
            self.channel = parent.channel
            experiment = parent.experiment
        else:
            project = project_dir()
            uri = tracking_uri or default_tracking_uri(project)
            buffer = Path(buffer_dir) if buffer_dir else default_buffer_dir(project)
            self.channel = _Channel(uri, default_artifact_root(uri, project), buffer, verbose)
        self.name, self.experiment, self.parent = name, experiment, parent
        self.key = uuid.uuid4().hex
        self.closed = False
        self.channel.submit({"op": "create_run", "key": self.key, "name": name, "experiment": experiment,
                             "tags": _texts(tags), "parent_key": parent.key if parent else None,
                             "time_ms": _now_ms()})

    # identity
    @property
    def run_id(self) -> str | None:
        """The MLflow run id, or None while the run exists only in the buffer (another process's flush
        may have created it since)."""
        return self.channel.known_run(self.key)

    @property
    def tracking_uri(self) -> str:
        """The URI as given (it may hold credentials: print `display_uri` instead)."""
        return self.channel.transport.tracking_uri

    @property
    def display_uri(self) -> str:
        """The URI without its user info, for messages and logs."""
        return redact_uri(self.tracking_uri)

    def child(self, name: str, tags: dict[str, str] | None = None) -> "RunTracker":
        return RunTracker(name, tags=tags, parent=self)

    # writes
    def log_params(self, params: dict[str, Any]) -> None:
        if params:
            self.channel.submit({"op": "params", "key": self.key, "params": _texts(params)})

    def log_config(self, config: dict[str, Any]) -> None:
        """The config as params, its secrets hidden (redact.py): the run keeps the real values."""
        self.log_params(flatten_params(redact_secrets(config)))

    def set_tags(self, tags: dict[str, Any]) -> None:
        if tags:
            self.channel.submit({"op": "tags", "key": self.key, "tags": _texts(tags)})

    def log_metrics(self, metrics: dict[str, Any], step: int = 0) -> None:
        clean = {k: float(v) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        if clean:
            self.channel.submit({"op": "metrics", "key": self.key, "step": int(step), "metrics": clean,
                                 "time_ms": _now_ms()})

    def log_table(self, rows: list[dict[str, Any]], artifact_file: str) -> None:
        if rows:
            self.channel.submit({"op": "table", "key": self.key, "columns": rows_to_columns(rows),
                                 "artifact_file": artifact_file})

    def log_trace(self, step: int, index: int, trajectory: Any) -> None:
        """One trajectory as an MLflow trace linked to this run (a record like any other: buffered
        when MLflow is away, replayed once)."""
        from agent_r1.tracking.traces import trace_record

        self.channel.submit(trace_record(self.key, self.experiment, step, index, trajectory))

    def log_artifacts(self, local_path: str | Path, artifact_path: str | None = None,
                      files: list[str] | None = None) -> None:
        """A file, or a folder's regular files (links are never followed); `files`: only these of them
        (relative paths, e.g. what a checkpoint's manifest lists)."""
        record = {"op": "artifacts", "key": self.key, "local_path": str(local_path), "artifact_path": artifact_path}
        self.channel.submit({**record, "files": list(files)} if files is not None else record)

    def log_dict(self, data: dict[str, Any], artifact_file: str) -> None:
        """A small JSON artifact (e.g. final metrics), written to a temp file first."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(artifact_file).name
            path.write_text(json.dumps(data, indent=1, default=str))
            parent = str(Path(artifact_file).parent)
            self.log_artifacts(path, None if parent == "." else parent)

    def end(self, status: str = "FINISHED") -> None:
        if not self.closed:
            self.closed = True
            self.channel.submit({"op": "end", "key": self.key, "status": status, "time_ms": _now_ms()})

    # the buffer
    def flush(self) -> bool:
        return self.channel.flush()

    def report(self) -> dict[str, Any]:
        return self.channel.report()

    def close(self, status: str = "FINISHED") -> dict[str, Any]:
        """Ends the run, tries one last flush and says what was sent, buffered or is still pending."""
        self.end(status)
        self.channel.flush(wait_s=CLOSE_FLUSH_WAIT_S)
        rep = self.report()
        if rep["pending"] or rep["rejected"]:
            self.channel._warn(f"{rep['pending']} record(s) still buffered in {rep['buffer']} "
                               f"({rep['rejected']} rejected); run `python -m agent_r1.tracking flush` "
                               f"when MLflow is reachable")
        return rep

    def ui_hint(self) -> str:
        uri = self.tracking_uri
        if uri.startswith("http"):
            return f"open {redact_uri(uri)} in a browser"
        return "run `make ui` (or infra/mlflow/server.sh) and open http://127.0.0.1:5000"


def _texts(values: dict[str, Any] | None) -> dict[str, str]:
    """Param and tag values as MLflow stores them (text), so a record never fails its shape check
    (records.py) for a caller's int or None."""
    return {str(k): str(v) for k, v in (values or {}).items()}


def _now_ms() -> int:
    return int(time.time() * 1000)
