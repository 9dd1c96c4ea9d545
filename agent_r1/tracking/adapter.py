"""MLflow behind the local record (buffer.py), shared by a run, its child runs and `python -m
agent_r1.tracking flush`: a record goes to MLflow at once, after whatever the buffer still holds, while
MLflow answers, and waits in the buffer while it does not; `flush` replays what waits, in order.

A record is written to the buffer before it is sent (an artifact only when it cannot go at once: its
files are copied then), so a process killed mid-send loses nothing. A failure that may heal
(`is_network`: a server down, a locked database) keeps the record and backs off; any other sets it
aside in rejected.jsonl with the reason, and so go the later records of a run MLflow refused to create,
or that no earlier record creates (its line lost).

A replay may send again what MLflow already holds (a flush killed before the buffer forgot it, a reply
lost on the network), so every op is idempotent: params, tags, metrics (the SQL store drops a repeated
point), artifacts (overwritten) and run ends are so as they are; a run is created with the tag
`agent_r1.run_key` and looked up by it first; a table whose file exists is not sent again (MLflow would
append its rows); a trace's id is derived from its record's key, and a finished one is skipped.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from agent_r1.redaction import redact_uri
from agent_r1.tracking.buffer import BadRecord, RecordBuffer, artifact_files, check_record

RUN_KEY_TAG = "agent_r1.run_key"
# MLflow error codes that mean "MLflow answered and refused this record": retrying cannot help
REJECTED_CODES = {"INVALID_PARAMETER_VALUE", "BAD_REQUEST", "RESOURCE_ALREADY_EXISTS", "INVALID_STATE",
                  "RESOURCE_DOES_NOT_EXIST", "PERMISSION_DENIED", "UNAUTHENTICATED", "MALFORMED_REQUEST"}


def is_network(err: BaseException) -> bool:
    """The failure may heal by itself (refused, reset, timed out, a locked database, a 5xx answer): the
    record waits, and the queue with it. Anything else never heals: the record is set aside."""
    code = getattr(err, "error_code", None)
    if isinstance(code, str):  # MLflow answered: refused (4xx-style) or failed on its side (5xx)
        return code not in REJECTED_CODES
    if isinstance(err, (BadRecord, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return False  # a path that will not appear by waiting
    if isinstance(err, (OSError, TimeoutError)):  # requests' errors are OSErrors
        return True
    return type(err).__module__.startswith("sqlalchemy") and type(err).__name__ in (
        "OperationalError", "DisconnectionError", "TimeoutError", "InterfaceError")


class MlflowAdapter:
    """One MLflow URI (through an explicit MlflowClient: no global active run) and its buffer folder."""

    def __init__(self, tracking_uri: str, artifact_root: str | None, buffer_dir: str | Path, verbose: bool = True):
        # MLflow's HTTP client retries a refused connection for minutes; the buffer retries here
        # (explicit settings win)
        for name, value in (("MAX_RETRIES", "1"), ("BACKOFF_FACTOR", "1"), ("TIMEOUT", "20")):
            os.environ.setdefault(f"MLFLOW_HTTP_REQUEST_{name}", value)
        self.tracking_uri, self.artifact_root = tracking_uri, artifact_root
        self.buffer, self.verbose, self.lock = RecordBuffer(buffer_dir), verbose, threading.RLock()
        self._client = self._tracing = None
        self._experiments: dict[str, str] = {}
        self.offline, self.retry_at, self.backoff, self.last_error = False, 0.0, 5.0, ""
        self.counts = dict.fromkeys(("sent", "buffered", "flushed", "rejected", "partial_lines"), 0)
        self.own_keys: set[str] = set()  # the runs this process created: its report is about their records
        self.run_ids = self.buffer.run_ids()
        # run key -> why MLflow refused to create it: the reason that run's later records are set aside with
        self.rejected_runs: dict[str, str] = {}

    # ------------------------------------------------------------------ live records and the replay
    def submit(self, record: Any) -> None:
        """Sends `record` now, after what the buffer holds, or keeps it there; a malformed one is set aside."""
        with self.lock:
            try:
                check_record(record)  # a malformed record never enters the buffer
            except BadRecord as err:
                return self._reject(record, err)
            if record["op"] == "create_run":
                self.own_keys.add(record["key"])
            # backing off, or another process is flushing: the record queues behind the buffer's records
            if (self.offline and time.monotonic() < self.retry_at) or not self.buffer.flush_lock.acquire(timeout=0):
                return self._keep(record)
            try:
                if record["op"] != "artifacts":
                    self._flush(fresh=self.buffer.append(record)["rid"])
                elif not self._flush():
                    self._keep(record)
                else:  # an upload is idempotent, and a copy of it costs: the files are copied only if it fails
                    try:
                        self._send(record)
                        self.counts["sent"] += 1
                    except Exception as err:  # noqa: BLE001 - the network's: kept; anything else: set aside
                        if self._failed(record, err):
                            self._keep(record)
            finally:
                self.buffer.flush_lock.release()

    def flush(self, wait_s: float | None = 0.0) -> bool:
        """Sends the buffered records in order; True when none is left behind. `wait_s`: how long to wait
        while another process flushes this buffer (0: do not wait, None: as long as it takes)."""
        with self.lock:
            if not self.buffer.flush_lock.acquire(timeout=wait_s):
                return False
            try:
                return self._flush()
            finally:
                self.buffer.flush_lock.release()

    def _flush(self, fresh: str | None = None) -> bool:
        """Sends what the buffer holds; `fresh`: the rid of the record being submitted (counted as sent
        at once, or as buffered when it stays)."""
        records, partial = self.buffer.scan()
        if not (records or partial):
            return True
        done: set[str] = set()
        ok = True
        try:
            for record in records:
                try:
                    self._send(self.buffer.sendable(record))  # an artifact from the buffer's own copy only
                    self.counts["sent" if record["rid"] == fresh else "flushed"] += 1
                except Exception as err:  # noqa: BLE001
                    if self._failed(record, err):
                        ok = False
                        break  # MLflow is away: the rest wait
                done.add(record["rid"])
        finally:
            partial = self.buffer.compact(done)
        if fresh is not None and fresh not in done:
            self.counts["buffered"] += 1
        if partial:
            self.counts["partial_lines"] += len(partial)
            self.warn(f"{len(partial)} unreadable line(s) in {self.buffer.pending_path} (lines "
                      f"{', '.join(str(n) for n, _ in partial)}) set aside in {self.buffer.rejected_path}")
        if ok and self.offline:
            self.warn(f"MLflow is back: flushed {len(done - {fresh})} buffered record(s)")
        if ok:
            self.offline, self.backoff = False, 5.0
        return ok

    def _send(self, record: dict[str, Any]) -> None:
        check_record(record)  # a malformed record says so, whatever else is wrong with its run
        for k in (record["key"], record.get("parent_key")):
            if k in self.rejected_runs:
                raise BadRecord(f"{'its run' if k == record['key'] else 'its parent run'} {k} was refused by MLflow: "
                                f"{self.rejected_runs[k]}")
            self.known_run(k)
        if new_id := self.send(record):
            self.run_ids[record["key"]] = new_id
            self.buffer.remember(record["key"], new_id)

    def _failed(self, record: dict[str, Any], err: Exception) -> bool:
        """True: the record may go later (MLflow away); False: set aside."""
        if not is_network(err):
            self._reject(record, err)
            return False
        self.last_error = redact_uri(f"{type(err).__name__}: {str(err)[:300]}")
        if not self.offline:
            self.warn(f"MLflow at {redact_uri(self.tracking_uri)} is unreachable ({self.last_error}); "
                      f"buffering to {self.buffer.pending_path}")
        self.offline, self.retry_at = True, time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, 120.0)
        self._client = self._tracing = None  # a fresh connection pool next time
        return True

    def _keep(self, record: dict[str, Any]) -> None:
        try:
            self.buffer.append(record)
            self.counts["buffered"] += 1
        except BadRecord as err:  # an artifact that is gone, or a link
            self._reject(record, err)

    def _reject(self, record: Any, err: BaseException) -> None:
        if not isinstance(record, dict):  # set aside as what it was: rejected.jsonl stays one object a line
            record = {"op": None, "record": repr(record)[:1000]}
        reason = redact_uri(f"{type(err).__name__}: {err}")
        self.buffer.reject(record, reason)
        self.counts["rejected"] += 1
        if record.get("op") == "create_run" and isinstance(record.get("key"), str):
            self.rejected_runs[record["key"]] = reason
        self.warn(f"MLflow rejected a {record.get('op')!r} record ({reason}); kept in {self.buffer.rejected_path}")

    def warn(self, message: str) -> None:
        if self.verbose:
            print(f"[tracking] {redact_uri(message)}", flush=True)

    def known_run(self, key: str | None) -> str | None:
        """The MLflow run id of a run key; another process may have created it since we last looked."""
        if key and key not in self.run_ids:
            self.run_ids.update(self.buffer.run_ids())
        return self.run_ids.get(key) if key else None

    def report(self) -> dict[str, Any]:
        records, partial = self.buffer.scan()
        # the buffer is shared: another process's queued records are its own to deliver, so a run's report
        # counts its own runs' records; one that made no run (the flush command) counts them all
        own = [r for r in records if str(r.get("key")) in self.own_keys] if self.own_keys else records
        return {**self.counts, "pending": len(own), "pending_in_buffer": len(records),
                "partial_lines": self.counts["partial_lines"] + len(partial), "offline": self.offline,
                "buffer": str(self.buffer.pending_path), "last_error": self.last_error,
                "set_aside": self.buffer.rejected_count(), "tracking_uri": redact_uri(self.tracking_uri)}

    # ------------------------------------------------------------------ one record to MLflow
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

    def send(self, record: dict[str, Any]) -> str | None:
        """Performs one checked record; returns the run id of a `create_run` not in `run_ids` yet."""
        from mlflow.entities import Metric, Param, RunTag

        op, c = record["op"], self.client
        if op == "create_run":
            return self._create_run(record)
        run_id = self.run_ids.get(record["key"])
        if run_id is None:
            raise BadRecord(f"run {record['key']} is not in MLflow, and no earlier record creates it")
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

    def _create_run(self, record: dict[str, Any]) -> str | None:
        if record["key"] in self.run_ids:  # created by a flush stopped before it could forget the record
            return None
        tags = {**(record.get("tags") or {}), RUN_KEY_TAG: record["key"]}
        if parent := record.get("parent_key"):
            if parent not in self.run_ids:
                raise BadRecord(f"parent run {parent} is not in MLflow, and no earlier record creates it")
            tags["mlflow.parentRunId"] = self.run_ids[parent]
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
