"""One record to MLflow, through an explicit MlflowClient of the run's URI (no global active run).

A flush stopped between MLflow taking a record and the buffer forgetting it sends that record again,
and a reply lost on the network leaves the record waiting though MLflow holds it. So every op is
idempotent:
- params, tags, metrics (the SQL store drops a repeated point), artifacts (same path: overwritten)
  and run ends are idempotent as they are;
- a run is created with the tag `agent_r1.run_key` and looked up by it first, so a replay reuses it;
- `log_table` appends to an existing table, so a table whose artifact file exists is not sent again;
- a trace's id is derived from its record's key (traces.py): a trace MLflow holds, finished, is skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_r1.tracking.buffer import BadRecord, artifact_files, check_record

RUN_KEY_TAG = "agent_r1.run_key"


class NotYet(Exception):
    """A record whose run does not exist in MLflow yet: kept for a later flush."""


class _Transport:
    def __init__(self, tracking_uri: str, artifact_root: str | None):
        self.tracking_uri, self.artifact_root = tracking_uri, artifact_root
        self._client = self._tracing = None
        self._experiments: dict[str, str] = {}

    @property
    def client(self) -> Any:
        if self._client is None:
            from mlflow.tracking import MlflowClient

            if self.tracking_uri.startswith("sqlite:///"):
                # MLflow creates a fresh SQLite store's tables on first use, and two processes doing it at
                # once fail with "table already exists": that first use happens under a lock beside it
                from agent_r1.filelock import FileLock

                with FileLock(self.tracking_uri[len("sqlite:///"):] + ".init.lock"):
                    client = MlflowClient(tracking_uri=self.tracking_uri)
                    client.search_experiments(max_results=1)
            else:
                client = MlflowClient(tracking_uri=self.tracking_uri)
            self._client = client
        return self._client

    @property
    def tracing(self) -> Any:
        """MLflow's tracing client of this URI (MlflowClient's own is private)."""
        if self._tracing is None:
            from mlflow.tracing.client import TracingClient

            self._tracing = TracingClient(self.tracking_uri)
        return self._tracing

    def reset(self) -> None:
        """A fresh client (and connection pool) next time."""
        self._client = self._tracing = None

    def experiment_id(self, name: str) -> str:
        if name not in self._experiments:
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                local = self.tracking_uri.startswith(("sqlite:", "file:", "postgresql:", "mysql:"))
                try:
                    exp_id = self.client.create_experiment(name, self.artifact_root if local else None)
                except Exception:  # noqa: BLE001 - created meanwhile by another process?
                    if (exp := self.client.get_experiment_by_name(name)) is None:
                        raise
                    exp_id = exp.experiment_id
            else:
                exp_id = exp.experiment_id
            self._experiments[name] = exp_id
        return self._experiments[name]

    def send(self, record: dict[str, Any], run_ids: dict[str, str]) -> str | None:
        """Performs the record; returns the run id of a `create_run` not in `run_ids` yet."""
        from mlflow.entities import Metric, Param, RunTag

        check_record(record)
        op, c = record["op"], self.client
        if op == "create_run":
            return self._create_run(record, run_ids)
        run_id = run_ids.get(record["key"])
        if run_id is None:
            raise NotYet(f"run {record['key']} not created yet")
        if op in ("params", "tags"):
            entity, limit = (Param, 6000) if op == "params" else (RunTag, 5000)
            items = [entity(k, str(v)[:limit]) for k, v in record[op].items()]
            for i in range(0, len(items), 100):
                c.log_batch(run_id, **{op: items[i:i + 100]})
        elif op == "metrics":
            items = [Metric(k, float(v), record["time_ms"], record["step"]) for k, v in record["metrics"].items()]
            for i in range(0, len(items), 1000):
                c.log_batch(run_id, metrics=items[i:i + 1000])
        elif op == "table":
            folder = str(Path(record["artifact_file"]).parent)
            listed = c.list_artifacts(run_id, None if folder == "." else folder)
            if not any(a.path == record["artifact_file"] for a in listed):
                c.log_table(run_id, data=record["columns"], artifact_file=record["artifact_file"])
        elif op == "artifacts":  # file by file, a folder's own regular files: MLflow's log_artifacts follows links
            path = Path(record["local_path"], record.get("file_name") or "")
            for rel in artifact_files(path, record.get("files")):
                parent = "/".join(p for p in (record.get("artifact_path"), rel.parent.as_posix()) if p and p != ".")
                c.log_artifact(run_id, str((path.parent if path.is_file() else path) / rel), parent or None)
        elif op == "end":
            c.set_terminated(run_id, record["status"], end_time=record["time_ms"])
        else:
            self._trace(run_id, record)
        return None

    def _create_run(self, record: dict[str, Any], run_ids: dict[str, str]) -> str | None:
        if record["key"] in run_ids:  # created by a flush stopped before it could forget the record
            return None
        tags = {**(record.get("tags") or {}), RUN_KEY_TAG: record["key"]}
        if parent := record.get("parent_key"):
            if parent not in run_ids:
                raise NotYet(f"parent run {parent} not created yet")
            tags["mlflow.parentRunId"] = run_ids[parent]
        exp_id = self.experiment_id(record["experiment"])
        found = self.client.search_runs([exp_id], f"tags.`{RUN_KEY_TAG}` = '{record['key']}'", max_results=1)
        if found:
            return found[0].info.run_id
        run = self.client.create_run(exp_id, start_time=record["time_ms"], tags=tags, run_name=record.get("name"))
        return run.info.run_id

    def _trace(self, run_id: str, record: dict[str, Any]) -> None:
        """Spans first, then the trace info: `start_trace` finishes the trace and tags it with its key,
        so a trace cut between the two is written again, one already finished is skipped."""
        from agent_r1.tracking.traces import TRACE_KEY_TAG, mlflow_trace, trace_id_of

        try:
            info = self.tracing.get_trace_info(trace_id_of(record["trace_key"]))
            if info is not None and info.tags.get(TRACE_KEY_TAG) == record["trace_key"]:
                return
        except Exception as err:  # noqa: BLE001 - not there yet is the usual answer; anything else: offline
            if getattr(err, "error_code", None) != "RESOURCE_DOES_NOT_EXIST":
                raise
        try:
            info, spans = mlflow_trace(record, self.experiment_id(record["experiment"]), run_id)
        except (KeyError, TypeError, ValueError) as err:
            raise BadRecord(f"a 'trace' record holds no readable span tree ({type(err).__name__}: {err})") from err
        self.tracing.log_spans(info.experiment_id, spans)
        self.tracing.start_trace(info)
