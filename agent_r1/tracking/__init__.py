"""MLflow tracking: runs, params, tags, per-iteration metrics, checkpoints, trajectory tables and traces.

Nothing here imports Prefect; MLflow itself is imported lazily (it is slow to import).

Where things go
- `MLFLOW_TRACKING_URI` when set (e.g. `http://127.0.0.1:5000`, see infra/mlflow/server.sh);
  otherwise a SQLite store `<project>/mlruns/mlflow.db` with artifacts in `<project>/mlruns/artifacts`
  (MLflow 3's plain file store is in maintenance mode). `<project>` is `AGENT_R1_PROJECT_DIR` or the
  current directory.

Never lost silently
Every write (run creation, params, tags, metrics, tables, traces, artifacts, run end) is a record. A record
is sent at once when MLflow answers; when it does not (server down, network, a locked database), the
record goes to a local JSONL buffer (`<project>/mlruns/buffer/pending.jsonl`, artifacts copied next
to it) and training goes on. The buffer is shared safely by processes (file locks), survives a kill at
any point (a journal makes a replay idempotent: no duplicate runs) and skips, then sets aside, a line
cut short by a kill (buffer.py). The buffer is flushed, in order, as soon as MLflow answers again (retried
with a back-off during the run, at `RunTracker.close()`, or later with
`python -m agent_r1.tracking flush`). A record MLflow *rejects* (a 4xx-style error such as an invalid
value), and every later record of a run MLflow refused to create, is moved to `rejected.jsonl` with
the reason, and the rest go on. `RunTracker.report()` counts all of it.

A tracking URI may hold credentials: whatever this package prints or logs shows it through
`redact_uri`.

Sample trajectories also become MLflow traces (the experiment's Traces tab): one span tree per
trajectory (agent -> turns -> tool calls), linked to the train run (`mlflow.sourceRun`) and tagged
with `iteration` and `sample_id` (traces.py).

Modules: location (where, and redact_uri), tags, rows and traces (what), buffer + filelock (the offline
buffer), transport (one record to MLflow), channel (send or buffer, flush), run (RunTracker),
sink (MlflowSink), cli (`python -m agent_r1.tracking flush|status`).
"""

from agent_r1.tracking.buffer import RecordBuffer
from agent_r1.tracking.channel import _Channel
from agent_r1.tracking.cli import main
from agent_r1.tracking.location import (DEFAULT_EXPERIMENT, default_artifact_root, default_buffer_dir,
                                        default_tracking_uri, project_dir, redact_uri)
from agent_r1.tracking.rows import rows_to_columns, trajectory_rows
from agent_r1.tracking.run import RunTracker
from agent_r1.tracking.sink import MlflowSink
from agent_r1.tracking.tags import dvc_lock_hashes, flatten_params, git_tags, machine_tags
from agent_r1.tracking.traces import trace_record, trajectory_span
from agent_r1.tracking.transport import _Transport

__all__ = ["DEFAULT_EXPERIMENT", "MlflowSink", "RecordBuffer", "RunTracker", "default_artifact_root",
           "default_buffer_dir", "default_tracking_uri", "dvc_lock_hashes", "flatten_params", "git_tags",
           "machine_tags", "main", "project_dir", "redact_uri", "rows_to_columns", "trace_record", "trajectory_rows",
           "trajectory_span"]
