"""The run's logger: metrics.jsonl in the run folder (metrics.py), the trainer's own record, and MLflow
behind the same call: runs, params, tags, per-iteration metrics, checkpoints, trajectory tables, traces.

MLflow is the system of record: `MLFLOW_TRACKING_URI` when set (e.g. a server, infra/mlflow/server.sh),
else a SQLite store `<project>/mlruns/mlflow.db` with artifacts beside it (`<project>`:
`AGENT_R1_PROJECT_DIR` or the current folder). While it is unreachable, every write waits in a local
buffer (`<project>/mlruns/buffer`, buffer.py) and is replayed, in order and once, when it answers again
(adapter.py); nothing is dropped: what MLflow refuses is set aside in `rejected.jsonl` with the reason.

Modules: metrics (metrics.jsonl), run (RunTracker and MlflowSink, `python -m agent_r1.tracking
flush|status`), adapter (live records and the replay), buffer (the local record), traces (table rows,
span trees), tags (what describes a run). Secrets in configs and URIs are hidden by agent_r1/redaction.py.
MLflow itself is imported lazily (it is slow to import); nothing here imports Prefect.
"""

from agent_r1.tracking.adapter import MlflowAdapter
from agent_r1.tracking.buffer import RecordBuffer
from agent_r1.tracking.run import DEFAULT_EXPERIMENT, MlflowSink, RunTracker, locations, main
from agent_r1.tracking.tags import dvc_lock_hashes, flatten_params, git_tags, machine_tags, project_dir
from agent_r1.tracking.traces import rows_to_columns, trace_record, trajectory_rows, trajectory_span

__all__ = ["DEFAULT_EXPERIMENT", "MlflowAdapter", "MlflowSink", "RecordBuffer", "RunTracker", "dvc_lock_hashes",
           "flatten_params", "git_tags", "locations", "machine_tags", "main", "project_dir", "rows_to_columns",
           "trace_record", "trajectory_rows", "trajectory_span"]
