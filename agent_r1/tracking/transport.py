"""Sending one record to MLflow through an explicit MlflowClient (no global active-run state).

Replaying a record twice must not change what MLflow holds, because a flush can be killed between
MLflow taking a record and the journal saying so:
- params, tags, metrics (the SQL store drops a repeated point), artifacts (same path: overwritten)
  and run ends are idempotent as they are;
- a run is created with the tag `agent_r1.run_key` (the buffer's key for it); a `create_run` that
  was begun but never marked done is first looked up by that tag, so a replay reuses the run;
- `log_table` appends to an existing table, so a table record that was begun but never marked done
  is skipped when its artifact already exists;
- a trace's id is derived from its record's stable key (traces.py), so a trace record is skipped
  when MLflow already holds that trace, finished (tagged with its key by `start_trace`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from agent_r1.tracking.records import BadRecord, check_record, is_network, is_rejected  # noqa: F401 (re-exported)

RUN_KEY_TAG = "agent_r1.run_key"


class NotYet(Exception):
    """A record whose run does not exist in MLflow yet: keep it for a later flush."""


class _Transport:
    def __init__(self, tracking_uri: str, artifact_root: str | None):
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self._client = None
        self._tracing = None
        self._experiments: dict[str, str] = {}
        self._ops: dict[str, Callable[[Any, str, dict[str, Any]], None]] = {
            "params": self._params, "tags": self._tags, "metrics": self._metrics, "table": self._table,
            "artifacts": self._artifacts, "end": self._end}

    @property
    def client(self):
        if self._client is None:
            from mlflow.tracking import MlflowClient

            if self.tracking_uri.startswith("sqlite:///"):
                # MLflow creates (migrates) a fresh SQLite store's tables on first use, and two
                # processes doing it at once (two deployment runs on a fresh checkout) fail with
                # "table already exists": that first use happens under a lock beside the database
                from agent_r1.tracking.filelock import FileLock

                with FileLock(self.tracking_uri[len("sqlite:///"):] + ".init.lock"):
                    client = MlflowClient(tracking_uri=self.tracking_uri)
                    client.search_experiments(max_results=1)
            else:
                client = MlflowClient(tracking_uri=self.tracking_uri)
            self._client = client
        return self._client

    @property
    def tracing(self):
        """MLflow's tracing client of this URI (MlflowClient's own is private)."""
        if self._tracing is None:
            from mlflow.tracing.client import TracingClient

            self._tracing = TracingClient(self.tracking_uri)
        return self._tracing

    def reset(self) -> None:
        """A fresh client (and connection pool) next time."""
        self._client = None
        self._tracing = None

    def experiment_id(self, name: str) -> str:
        if name not in self._experiments:
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                local = self.tracking_uri.startswith(("sqlite:", "file:", "postgresql:", "mysql:"))
                try:
                    exp_id = self.client.create_experiment(
                        name, artifact_location=self.artifact_root if local else None)
                except Exception:  # noqa: BLE001 - created concurrently by another process?
                    exp = self.client.get_experiment_by_name(name)
                    if exp is None:
                        raise
                    exp_id = exp.experiment_id
            else:
                exp_id = exp.experiment_id
            self._experiments[name] = exp_id
        return self._experiments[name]

    def send(self, record: dict[str, Any], run_ids: dict[str, str], uncertain: bool = False) -> str | None:
        """Performs the record; returns the run id for a `create_run` that had none in `run_ids`.
        `uncertain`: an earlier flush began this record and may have sent it (see the module doc)."""
        check_record(record)
        if record["op"] == "create_run":
            return self._create_run(record, run_ids, uncertain)
        run_id = run_ids.get(record["key"])
        if run_id is None:
            raise NotYet(f"run {record['key']} not created yet")
        if uncertain and record["op"] == "table" and self._has_artifact(run_id, record["artifact_file"]):
            return None
        if record["op"] == "trace":
            self._trace(run_id, record)
            return None
        self._ops[record["op"]](self.client, run_id, record)
        return None

    def _create_run(self, record: dict[str, Any], run_ids: dict[str, str], uncertain: bool) -> str | None:
        if record["key"] in run_ids:  # created by an earlier flush that was stopped before its journal
            return None
        tags = {**(record.get("tags") or {}), RUN_KEY_TAG: record["key"]}
        parent = record.get("parent_key")
        if parent:
            if parent not in run_ids:
                raise NotYet(f"parent run {parent} not created yet")
            tags["mlflow.parentRunId"] = run_ids[parent]
        exp_id = self.experiment_id(record["experiment"])
        if uncertain:
            found = self.client.search_runs([exp_id], f"tags.`{RUN_KEY_TAG}` = '{record['key']}'", max_results=1)
            if found:
                return found[0].info.run_id
        run = self.client.create_run(exp_id, start_time=record["time_ms"], tags=tags, run_name=record.get("name"))
        return run.info.run_id

    def _has_artifact(self, run_id: str, artifact_file: str) -> bool:
        folder = str(Path(artifact_file).parent)
        listed = self.client.list_artifacts(run_id, None if folder == "." else folder)
        return any(a.path == artifact_file for a in listed)

    def _trace(self, run_id: str, record: dict[str, Any]) -> None:
        """Spans first, then the trace info: `start_trace` finishes the trace and tags it with its key,
        so a trace cut between the two is written again, one already finished is skipped."""
        from agent_r1.tracking.traces import TRACE_KEY_TAG, mlflow_trace, trace_id_of

        if self._trace_done(trace_id_of(record["trace_key"]), record["trace_key"], TRACE_KEY_TAG):
            return
        try:
            info, spans = mlflow_trace(record, self.experiment_id(record["experiment"]), run_id)
        except (KeyError, TypeError, ValueError) as err:
            raise BadRecord(f"a 'trace' record holds no readable span tree ({type(err).__name__}: {err})") from err
        except Exception as err:  # noqa: BLE001 - MLflow's Span.from_dict wraps what it cannot read
            if getattr(err, "error_code", None) == "INVALID_PARAMETER_VALUE":
                raise BadRecord(f"a 'trace' record holds no readable span tree ({err})") from err
            raise
        try:
            self.tracing.log_spans(info.experiment_id, spans)
        except NotImplementedError as err:  # a server before MLflow 3.4: set aside rather than retry forever
            raise BadRecord(f"this MLflow server does not take trace spans ({err}); upgrade it to >= 3.4") from err
        self.tracing.start_trace(info)

    def _trace_done(self, trace_id: str, trace_key: str, key_tag: str) -> bool:
        try:
            info = self.tracing.get_trace_info(trace_id)
        except Exception as err:  # noqa: BLE001 - not there yet is the usual answer; anything else: offline
            if getattr(err, "error_code", None) == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise
        return info is not None and info.tags.get(key_tag) == trace_key

    # one method per op, registered in self._ops
    @staticmethod
    def _params(c: Any, run_id: str, record: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in record["params"].items()]
        for i in range(0, len(items), 100):
            c.log_batch(run_id, params=items[i:i + 100])

    @staticmethod
    def _tags(c: Any, run_id: str, record: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:5000]) for k, v in record["tags"].items()]
        for i in range(0, len(items), 100):
            c.log_batch(run_id, tags=items[i:i + 100])

    @staticmethod
    def _metrics(c: Any, run_id: str, record: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        try:
            items = [Metric(k, float(v), int(record["time_ms"]), int(record["step"]))
                     for k, v in record["metrics"].items()]
        except (TypeError, ValueError, AttributeError) as err:
            raise BadRecord(f"a 'metrics' record holds a value that is not a number ({err})") from err
        for i in range(0, len(items), 1000):
            c.log_batch(run_id, metrics=items[i:i + 1000])

    @staticmethod
    def _table(c: Any, run_id: str, record: dict[str, Any]) -> None:
        c.log_table(run_id, data=record["columns"], artifact_file=record["artifact_file"])

    @staticmethod
    def _artifacts(c: Any, run_id: str, record: dict[str, Any]) -> None:
        from agent_r1.tracking.files import artifact_files

        path = Path(record["local_path"])
        target = path / record["file_name"] if record.get("file_name") else path
        if not (target.exists() or target.is_symlink()):
            raise BadRecord(f"the artifact copy {target} is gone")
        if target.is_file() and not target.is_symlink():
            c.log_artifact(run_id, str(target), record.get("artifact_path"))
            return
        # file by file, the folder's own regular files only: MLflow's log_artifacts follows links
        base = record.get("artifact_path")
        for rel in artifact_files(target, record.get("files")):
            parent = "/".join(p for p in (base, rel.parent.as_posix()) if p and p != ".")
            c.log_artifact(run_id, str(target / rel), parent or None)

    @staticmethod
    def _end(c: Any, run_id: str, record: dict[str, Any]) -> None:
        c.set_terminated(run_id, record["status"], end_time=record["time_ms"])
