"""One MLflow run (optionally the child of another), safe to use while MLflow is down; the trainer's
sink over it (MlflowSink); where records go; `python -m agent_r1.tracking flush|status`.

A record is written to the local buffer (buffer.py) and, while MLflow answers, sent at once after
whatever the buffer holds (order is kept). When MLflow does not answer (server down, network, a locked
database) the record stays there and training goes on; the buffer is flushed as soon as MLflow answers
again: retried with a back-off during the run, at `RunTracker.close()`, or later by
`python -m agent_r1.tracking flush`. A record MLflow
refuses, and every later record of a run it refused to create, is set aside in `rejected.jsonl` with
the reason, and the rest go on. Order matters only within a run: a run whose records cannot go yet
(its parent is not created) waits without holding up the others.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_r1.tracking.buffer import BadRecord, RecordBuffer, check_record, is_network
from agent_r1.redaction import redact_secrets, redact_uri
from agent_r1.tracking.tags import flatten_params, project_dir
from agent_r1.tracking.traces import rows_to_columns, trace_record, trajectory_rows
from agent_r1.tracking.transport import NotYet, _Transport

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


class _Channel:
    """What a run and its child runs share: the transport, the buffer, counters and the back-off."""

    def __init__(self, tracking_uri: str, artifact_root: str | None, buffer_dir: Path, verbose: bool = True):
        # MLflow's HTTP client retries a refused connection for minutes; the buffer retries here
        # (explicit settings win)
        for name, value in (("MAX_RETRIES", "1"), ("BACKOFF_FACTOR", "1"), ("TIMEOUT", "20")):
            os.environ.setdefault(f"MLFLOW_HTTP_REQUEST_{name}", value)
        self.transport, self.buffer = _Transport(tracking_uri, artifact_root), RecordBuffer(buffer_dir)
        self.lock, self.verbose = threading.RLock(), verbose
        self.offline, self.retry_at, self.backoff, self.last_error = False, 0.0, 5.0, ""
        self.counts = dict.fromkeys(("sent", "buffered", "flushed", "rejected", "partial_lines"), 0)
        self.own_keys: set[str] = set()  # the runs this process created: its report is about their records
        self.run_ids = self.buffer.run_ids()
        # run key -> why MLflow refused to create it (another process finds no pending record creating that
        # run, so it sets the run's records aside all the same)
        self.rejected_runs: dict[str, str] = {}

    def _warn(self, message: str) -> None:
        if self.verbose:
            print(f"[tracking] {redact_uri(message)}", flush=True)

    def known_run(self, key: str | None) -> str | None:
        """The MLflow run id of a run key; another process may have created it since we last looked."""
        if key and key not in self.run_ids:
            self.run_ids.update(self.buffer.run_ids())
        return self.run_ids.get(key) if key else None

    def submit(self, record: Any) -> None:
        with self.lock:
            try:
                check_record(record)  # a malformed record never enters the queue
            except BadRecord as err:
                return self._reject(record, err)
            if record["op"] == "create_run":
                self.own_keys.add(record["key"])
            # backing off, or another process is flushing: the record queues behind the buffer's records
            if (self.offline and time.monotonic() < self.retry_at) or not self.buffer.flush_lock.acquire(timeout=0):
                return self._keep(record)
            try:
                if record["op"] != "artifacts":  # written ahead, so a kill mid-send loses nothing; sent by the flush
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

    def _send(self, record: dict[str, Any]) -> None:
        check_record(record)  # a malformed record says so, whatever else is wrong with its run
        for k in (record["key"], record.get("parent_key")):
            if k in self.rejected_runs:
                raise BadRecord(f"{'its run' if k == record['key'] else 'its parent run'} {k} was refused by MLflow: "
                                f"{self.rejected_runs[k]}")
            self.known_run(k)
        if new_id := self.transport.send(record, self.run_ids):
            self.run_ids[record["key"]] = new_id
            self.buffer.remember(record["key"], new_id)

    def _failed(self, record: dict[str, Any], err: Exception) -> bool:
        """True: the record may go later (MLflow away, its run not created yet); False: set aside."""
        if isinstance(err, NotYet):
            return True
        if not is_network(err):
            self._reject(record, err)
            return False
        self.last_error = redact_uri(f"{type(err).__name__}: {str(err)[:300]}")
        if not self.offline:
            self._warn(f"MLflow at {redact_uri(self.transport.tracking_uri)} is unreachable ({self.last_error}); "
                       f"buffering to {self.buffer.pending_path}")
        self.offline, self.retry_at = True, time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, 120.0)
        self.transport.reset()
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
        self._warn(f"MLflow rejected a {record.get('op')!r} record ({reason}); kept in {self.buffer.rejected_path}")

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
        # lists, not sets: a hand-edited line may hold a key of any JSON type
        creates = [r.get("key") for r in records if r.get("op") == "create_run"]
        waiting: list[str] = []  # runs whose records cannot go yet: later ones wait too (order)
        done: set[str] = set()
        ok = True
        try:
            for record in records:
                if record.get("key") in waiting:
                    continue
                try:
                    self._send(self.buffer.sendable(record))  # an artifact from the buffer's own copy only
                    self.counts["sent" if record["rid"] == fresh else "flushed"] += 1
                except Exception as err:  # noqa: BLE001
                    needs = "parent_key" if record["op"] == "create_run" else "key"
                    if isinstance(err, NotYet) and record.get(needs) not in creates:  # its creating line was lost
                        err = BadRecord(f"{err}, and no pending record creates it")
                    if self._failed(record, err):
                        ok = False
                        if not isinstance(err, NotYet):
                            break  # MLflow is away: the rest wait
                        waiting.append(record["key"])
                        continue
                done.add(record["rid"])
        finally:
            partial = self.buffer.compact(done)
        if fresh is not None and fresh not in done:
            self.counts["buffered"] += 1
        if partial:
            self.counts["partial_lines"] += len(partial)
            self._warn(f"{len(partial)} unreadable line(s) in {self.buffer.pending_path} (lines "
                       f"{', '.join(str(n) for n, _ in partial)}) set aside in {self.buffer.rejected_path}")
        if ok and self.offline:
            self._warn(f"MLflow is back: flushed {len(done - {fresh})} buffered record(s)")
        if ok:
            self.offline, self.backoff = False, 5.0
        return ok

    def report(self) -> dict[str, Any]:
        records, partial = self.buffer.scan()
        # the buffer is shared: another process's queued records are its own to deliver, so a run's report
        # counts its own runs' records; a channel that made no run (the flush command) counts them all
        own = [r for r in records if str(r.get("key")) in self.own_keys] if self.own_keys else records
        return {**self.counts, "pending": len(own), "pending_in_buffer": len(records),
                "partial_lines": self.counts["partial_lines"] + len(partial), "offline": self.offline,
                "buffer": str(self.buffer.pending_path), "last_error": self.last_error,
                "set_aside": self.buffer.rejected_count(), "tracking_uri": redact_uri(self.transport.tracking_uri)}


class RunTracker:
    """One MLflow run (optionally the child of another). Every method is safe to call while MLflow is
    down: writes are buffered and flushed later, and the run id becomes known once MLflow answers."""

    def __init__(self, name: str, experiment: str = DEFAULT_EXPERIMENT, tags: dict[str, str] | None = None,
                 tracking_uri: str | None = None, buffer_dir: str | Path | None = None,
                 parent: RunTracker | None = None, verbose: bool = True):
        if parent is not None:
            self.channel, experiment = parent.channel, parent.experiment
        else:
            self.channel = _Channel(*locations(tracking_uri, buffer_dir), verbose)
        self.name, self.experiment, self.parent = name, experiment, parent
        self.key, self.closed = uuid.uuid4().hex, False
        self.channel.submit({"op": "create_run", "key": self.key, "name": name, "experiment": experiment,
                             "tags": _texts(tags), "parent_key": parent.key if parent else None,
                             "time_ms": _now_ms()})

    @property
    def run_id(self) -> str | None:
        """The MLflow run id, or None while the run exists only in the buffer."""
        return self.channel.known_run(self.key)

    @property
    def tracking_uri(self) -> str:
        """The URI as given (it may hold credentials: show `display_uri` instead)."""
        return self.channel.transport.tracking_uri

    @property
    def display_uri(self) -> str:
        return redact_uri(self.tracking_uri)

    def child(self, name: str, tags: dict[str, str] | None = None) -> RunTracker:
        return RunTracker(name, tags=tags, parent=self)

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
        """One trajectory as an MLflow trace linked to this run (traces.py)."""
        self.channel.submit(trace_record(self.key, self.experiment, step, index, trajectory))

    def log_artifacts(self, local_path: str | Path, artifact_path: str | None = None,
                      files: list[str] | None = None) -> None:
        """A file, or a folder's regular files (links are never followed); `files`: only these of them."""
        record = {"op": "artifacts", "key": self.key, "local_path": str(local_path), "artifact_path": artifact_path}
        self.channel.submit({**record, "files": list(files)} if files is not None else record)

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
            self.channel.submit({"op": "end", "key": self.key, "status": status, "time_ms": _now_ms()})

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
            self.channel._warn(f"{rep['pending']} record(s) still buffered in {rep['buffer']} ({rep['rejected']} "
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
    channel = _Channel(*locations(args.tracking_uri, args.buffer))
    # flush: another process flushing this buffer is waited for, then this one goes on
    ok = channel.flush(wait_s=None) if args.action == "flush" else True
    print(json.dumps(channel.report(), indent=1))
    return 0 if ok else 1
