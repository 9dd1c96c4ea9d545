"""MLflow tracking: runs, params, tags, per-iteration metrics, checkpoints and trajectory tables.

Nothing here imports Prefect; MLflow itself is imported lazily (it is slow to import).

Where things go
- `MLFLOW_TRACKING_URI` when set (e.g. `http://127.0.0.1:5000`, see infra/mlflow/server.sh);
  otherwise a SQLite store `<project>/mlruns/mlflow.db` with artifacts in `<project>/mlruns/artifacts`
  (MLflow 3's plain file store is in maintenance mode). `<project>` is `AGENT_R1_PROJECT_DIR` or the
  current directory.

Never lost silently
Every write (run creation, params, tags, metrics, tables, artifacts, run end) is a record. A record
is sent at once when MLflow answers; when it does not (server down, network, a locked database), the
record goes to a local JSONL buffer (`<project>/mlruns/buffer/pending.jsonl`, artifacts copied next
to it) and training goes on. The buffer is flushed, in order, as soon as MLflow answers again (retried
with a back-off during the run, at `RunTracker.close()`, or later with
`python -m agent_r1.tracking flush`). A record MLflow *rejects* (a 4xx-style error such as an invalid
value) is not retried forever: it is moved to `rejected.jsonl`. `RunTracker.report()` counts all of it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DEFAULT_EXPERIMENT = "agent-r1"
# MLflow error codes that mean "MLflow answered and refused this record": retrying cannot help.
_REJECTED_CODES = {"INVALID_PARAMETER_VALUE", "BAD_REQUEST", "RESOURCE_ALREADY_EXISTS", "INVALID_STATE",
                   "RESOURCE_DOES_NOT_EXIST", "PERMISSION_DENIED", "UNAUTHENTICATED", "MALFORMED_REQUEST"}


# --- where ---------------------------------------------------------------------------------------
def project_dir() -> Path:
    return Path(os.environ.get("AGENT_R1_PROJECT_DIR") or Path.cwd()).resolve()


def default_tracking_uri(project: str | Path | None = None) -> str:
    """`MLFLOW_TRACKING_URI` if set, else the project's SQLite store."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    root = Path(project).resolve() if project else project_dir()
    (root / "mlruns").mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"


def default_artifact_root(tracking_uri: str | None = None, project: str | Path | None = None) -> str:
    """Next to a SQLite store (`<dir of mlflow.db>/artifacts`); otherwise `<project>/mlruns/artifacts`.
    Used only for experiments this code creates on a local store; a server decides its own."""
    if tracking_uri and tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri[len("sqlite:///"):]).parent / "artifacts").resolve().as_uri()
    root = Path(project).resolve() if project else project_dir()
    return (root / "mlruns" / "artifacts").as_uri()


def _quiet_http_defaults() -> None:
    """MLflow's HTTP client retries a refused connection for minutes by default; the buffer does the
    retrying here, so a down server costs seconds, not minutes. Explicit settings win."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")


# --- what ----------------------------------------------------------------------------------------
def flatten_params(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """{"train": {"lr": 1e-3}} -> {"train.lr": "0.001"}; lists/tuples as JSON."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_params(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(list(value))
        else:
            out[name] = "" if value is None else str(value)
    return out


def git_tags(path: str | Path | None = None) -> dict[str, str]:
    """Commit, branch and dirty flag of the checkout holding `path` (empty outside git)."""
    cwd = str(path or project_dir())

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        tags = {"git.commit": git("rev-parse", "HEAD")}
    except (OSError, subprocess.SubprocessError):
        return {}
    try:
        tags["git.branch"] = git("rev-parse", "--abbrev-ref", "HEAD")
        tags["git.dirty"] = str(bool(git("status", "--porcelain", "--untracked-files=no")))
    except (OSError, subprocess.SubprocessError):
        pass
    tags["mlflow.source.git.commit"] = tags["git.commit"]
    return tags


def dvc_lock_hashes(project: str | Path | None = None, stages: Iterable[str] | None = None) -> dict[str, str]:
    """`dvc.<stage>.<out path>` -> the content hash DVC recorded in dvc.lock (empty without one)."""
    import yaml

    lock = Path(project or project_dir()) / "dvc.lock"
    if not lock.exists():
        return {}
    data = yaml.safe_load(lock.read_text()) or {}
    wanted = set(stages) if stages is not None else None
    tags = {}
    for stage, entry in (data.get("stages") or {}).items():
        if wanted is not None and stage not in wanted:
            continue
        for out in entry.get("outs") or []:
            digest = out.get("md5") or out.get(out.get("hash", ""), "")
            if digest:
                tags[f"dvc.{stage}.{out['path']}"] = str(digest)
    return tags


def machine_tags(config: dict[str, Any] | None = None) -> dict[str, str]:
    """Host, platform, accelerator, library versions and the engines the config selects."""
    tags = {"machine.host": platform.node(), "machine.platform": platform.platform(),
            "machine.python": platform.python_version(), "machine.cpus": str(os.cpu_count())}
    try:
        import torch

        tags["machine.torch"] = torch.__version__
        tags["machine.accelerator"] = (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    except Exception:  # noqa: BLE001 - a tag is not worth failing a run
        pass
    cfg = config or {}
    rollout = cfg.get("rollout") or {}
    ray = cfg.get("ray") or {}
    tags["engine.rollout"] = str(rollout.get("engine") or "transformers")
    tags["engine.retrieval"] = str((cfg.get("search") or {}).get("backend", ""))
    tags["engine.ray"] = "ray" if ray.get("enabled") else "in-process"
    tags["model"] = str((cfg.get("model") or {}).get("name_or_path") or "local-small")
    return tags


def trajectory_rows(step: int, trajectories: list[Any], tokenizer: Any = None,
                    max_rows: int | None = None) -> list[dict[str, Any]]:
    """One row per trajectory: question, gold, answer, EM, reward parts, and every turn's action and
    observation text (as the model produced / the tool returned it), plus a readable transcript."""
    from agent_r1.rewards.qa import exact_match

    trajs = trajectories[:max_rows] if max_rows else trajectories
    width = max((len(t.turns) for t in trajs), default=0)
    rows = []
    for t in trajs:
        sample = t.sample or {}
        gold = list(sample.get("answers") or [])
        process = [float(turn.process_reward) for turn in t.turns]
        row: dict[str, Any] = {
            "iteration": int(step), "sample_id": str(t.sample_id), "question": str(sample.get("question", "")),
            "gold": " | ".join(map(str, gold)), "answer": "" if t.answer is None else str(t.answer),
            "em": float(exact_match(t.answer or "", gold)) if gold else 0.0,
            "outcome_reward": float(t.outcome_reward), "process_reward": float(sum(process)),
            "score": float(t.score), "stop_reason": str(t.stop_reason), "num_turns": len(t.turns),
            "tool_calls": int(sum(turn.tool_calls for turn in t.turns)),
        }
        lines = []
        for i in range(width):
            turn = t.turns[i] if i < len(t.turns) else None
            row[f"turn{i + 1}_action"] = turn.action_text if turn else ""
            row[f"turn{i + 1}_observation"] = turn.observation_text if turn else ""
            row[f"turn{i + 1}_process_reward"] = float(turn.process_reward) if turn else 0.0
            if turn:
                lines.append(f"[action {i + 1}] {turn.action_text}")
                if turn.observation_text:
                    lines.append(f"[observation {i + 1}] {turn.observation_text}")
        row["transcript"] = "\n".join(lines)
        if tokenizer is not None:
            row["prompt"] = tokenizer.decode(t.prompt_ids)
        rows.append(row)
    return rows


def rows_to_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    return {k: [row.get(k) for row in rows] for k in keys}


# --- the buffer ----------------------------------------------------------------------------------
class RecordBuffer:
    """An append-only JSONL of records MLflow has not taken yet, shared by a run and its children.

    Runs created while MLflow was unreachable have a local key; `runs.json` maps keys to MLflow run
    ids once they exist, so a flush in another process (`python -m agent_r1.tracking flush`) works.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.pending_path = self.root / "pending.jsonl"
        self.rejected_path = self.root / "rejected.jsonl"
        self.map_path = self.root / "runs.json"
        self.lock = threading.RLock()

    def _ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def run_ids(self) -> dict[str, str]:
        return json.loads(self.map_path.read_text()) if self.map_path.exists() else {}

    def remember(self, key: str, run_id: str) -> None:
        with self.lock:
            self._ensure()
            ids = self.run_ids()
            ids[key] = run_id
            tmp = self.map_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(ids, indent=1))
            os.replace(tmp, self.map_path)

    def pending(self) -> list[dict[str, Any]]:
        if not self.pending_path.exists():
            return []
        return [json.loads(ln) for ln in self.pending_path.read_text().splitlines() if ln.strip()]

    def append(self, record: dict[str, Any]) -> None:
        with self.lock:
            self._ensure()
            if record.get("op") == "artifacts":  # the files may change or be pruned: keep a copy
                blob = self.root / "blobs" / uuid.uuid4().hex
                src = Path(record["local_path"])
                if src.is_dir():
                    shutil.copytree(src, blob)
                else:
                    blob.mkdir(parents=True)
                    shutil.copy2(src, blob / src.name)
                    record = {**record, "file_name": src.name}
                record = {**record, "local_path": str(blob), "blob": True}
            with self.pending_path.open("a") as f:
                f.write(json.dumps(record, default=str) + "\n")

    def rewrite(self, records: list[dict[str, Any]]) -> None:
        with self.lock:
            if not records:
                self.pending_path.unlink(missing_ok=True)
                return
            tmp = self.pending_path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in records))
            os.replace(tmp, self.pending_path)

    def reject(self, record: dict[str, Any], error: str) -> None:
        with self.lock:
            self._ensure()
            with self.rejected_path.open("a") as f:
                f.write(json.dumps({**record, "error": error}, default=str) + "\n")

    def drop_blob(self, record: dict[str, Any]) -> None:
        if record.get("blob"):
            shutil.rmtree(record["local_path"], ignore_errors=True)


class _Transport:
    """Sends one record to MLflow through an explicit MlflowClient (no global active-run state)."""

    def __init__(self, tracking_uri: str, artifact_root: str | None):
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self._client = None
        self._experiments: dict[str, str] = {}

    @property
    def client(self):
        if self._client is None:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

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

    def send(self, record: dict[str, Any], run_ids: dict[str, str]) -> str | None:
        """Performs the record; returns the new run id for a `create_run`."""
        from mlflow.entities import Metric, Param, RunTag

        op = record["op"]
        if op == "create_run":
            tags = dict(record.get("tags") or {})
            parent = record.get("parent_key")
            if parent:
                if parent not in run_ids:
                    raise _NotYet(f"parent run {parent} not created yet")
                tags["mlflow.parentRunId"] = run_ids[parent]
            run = self.client.create_run(self.experiment_id(record["experiment"]), start_time=record["time_ms"],
                                         tags=tags, run_name=record.get("name"))
            return run.info.run_id
        run_id = run_ids.get(record["key"])
        if run_id is None:
            raise _NotYet(f"run {record['key']} not created yet")
        c = self.client
        if op == "params":
            items = [Param(k, v[:6000]) for k, v in record["params"].items()]
            for i in range(0, len(items), 100):
                c.log_batch(run_id, params=items[i:i + 100])
        elif op == "tags":
            items = [RunTag(k, str(v)[:5000]) for k, v in record["tags"].items()]
            for i in range(0, len(items), 100):
                c.log_batch(run_id, tags=items[i:i + 100])
        elif op == "metrics":
            items = [Metric(k, float(v), record["time_ms"], int(record["step"])) for k, v in record["metrics"].items()]
            for i in range(0, len(items), 1000):
                c.log_batch(run_id, metrics=items[i:i + 1000])
        elif op == "table":
            c.log_table(run_id, data=record["columns"], artifact_file=record["artifact_file"])
        elif op == "artifacts":
            path = Path(record["local_path"])
            if record.get("file_name"):
                c.log_artifact(run_id, str(path / record["file_name"]), record.get("artifact_path"))
            elif path.is_dir():
                c.log_artifacts(run_id, str(path), record.get("artifact_path"))
            else:
                c.log_artifact(run_id, str(path), record.get("artifact_path"))
        elif op == "end":
            c.set_terminated(run_id, record["status"], end_time=record["time_ms"])
        else:
            raise ValueError(f"unknown tracking record op {op!r}")
        return None


class _NotYet(Exception):
    """A record whose run does not exist in MLflow yet: keep it for a later flush."""


def _rejected(err: BaseException) -> bool:
    code = getattr(err, "error_code", None)
    return isinstance(code, str) and code in _REJECTED_CODES


class _Channel:
    """The state shared by a run and its child runs: transport, buffer, counters, back-off."""

    def __init__(self, tracking_uri: str, artifact_root: str | None, buffer_dir: Path, verbose: bool = True):
        _quiet_http_defaults()
        self.transport = _Transport(tracking_uri, artifact_root)
        self.buffer = RecordBuffer(buffer_dir)
        self.lock = threading.RLock()
        self.verbose = verbose
        self.offline = False
        self.retry_at = 0.0
        self.backoff = 5.0
        self.last_error = ""
        self.counts = {"sent": 0, "buffered": 0, "flushed": 0, "rejected": 0}
        self.run_ids = self.buffer.run_ids()

    def _warn(self, message: str) -> None:
        if self.verbose:
            print(f"[tracking] {message}", flush=True)

    def _go_offline(self, err: BaseException) -> None:
        self.last_error = f"{type(err).__name__}: {str(err)[:300]}"
        if not self.offline:
            self._warn(f"MLflow at {self.transport.tracking_uri} is unreachable ({self.last_error}); "
                       f"buffering to {self.buffer.pending_path}")
        self.offline = True
        self.retry_at = time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, 120.0)
        self.transport._client = None  # a fresh client (and connection pool) next time

    def _send(self, record: dict[str, Any]) -> None:
        new_id = self.transport.send(record, self.run_ids)
        if new_id:
            self.run_ids[record["key"]] = new_id
            self.buffer.remember(record["key"], new_id)

    def submit(self, record: dict[str, Any]) -> None:
        with self.lock:
            if self.offline and time.monotonic() < self.retry_at:
                self._append(record)
                return
            if not self.flush():
                self._append(record)
                return
            try:
                self._send(record)
                self.counts["sent"] += 1
            except _NotYet:
                self._append(record)
            except Exception as err:  # noqa: BLE001 - whatever the cause, the record is kept
                if _rejected(err):
                    self._reject(record, err)
                else:
                    self._go_offline(err)
                    self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        self.buffer.append(record)
        self.counts["buffered"] += 1

    def _reject(self, record: dict[str, Any], err: BaseException) -> None:
        self.buffer.reject(record, f"{type(err).__name__}: {err}")
        self.counts["rejected"] += 1
        self._warn(f"MLflow rejected a {record['op']!r} record ({err}); kept in {self.buffer.rejected_path}")

    def flush(self) -> bool:
        """Sends buffered records in order; True when the buffer is empty afterwards."""
        with self.lock:
            records = self.buffer.pending()
            if not records:
                return True
            done = 0
            try:
                for record in records:
                    try:
                        self._send(record)
                        self.counts["flushed"] += 1
                    except _NotYet:
                        break
                    except Exception as err:  # noqa: BLE001
                        if not _rejected(err):
                            raise
                        self._reject(record, err)
                    self.buffer.drop_blob(record)
                    done += 1
            except Exception as err:  # noqa: BLE001
                self._go_offline(err)
            self.buffer.rewrite(records[done:])
            if done == len(records):
                if self.offline:
                    self._warn(f"MLflow is back: flushed {done} buffered record(s)")
                self.offline, self.backoff = False, 5.0
                return True
            return False

    def report(self) -> dict[str, Any]:
        return {**self.counts, "pending": len(self.buffer.pending()), "offline": self.offline,
                "buffer": str(self.buffer.pending_path), "last_error": self.last_error}


# --- a run ---------------------------------------------------------------------------------------
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
            buffer = Path(buffer_dir) if buffer_dir else Path(
                os.environ.get("AGENT_R1_MLFLOW_BUFFER") or project / "mlruns" / "buffer")
            self.channel = _Channel(uri, default_artifact_root(uri, project), buffer, verbose)
        self.name, self.experiment, self.parent = name, experiment, parent
        self.key = uuid.uuid4().hex
        self.closed = False
        self.channel.submit({"op": "create_run", "key": self.key, "name": name, "experiment": experiment,
                             "tags": dict(tags or {}), "parent_key": parent.key if parent else None,
                             "time_ms": _now_ms()})

    # identity
    @property
    def run_id(self) -> str | None:
        """The MLflow run id, or None while the run exists only in the buffer."""
        return self.channel.run_ids.get(self.key)

    @property
    def tracking_uri(self) -> str:
        return self.channel.transport.tracking_uri

    def child(self, name: str, tags: dict[str, str] | None = None) -> "RunTracker":
        return RunTracker(name, tags=tags, parent=self)

    # writes
    def log_params(self, params: dict[str, Any]) -> None:
        if params:
            self.channel.submit({"op": "params", "key": self.key, "params": {k: str(v) for k, v in params.items()}})

    def log_config(self, config: dict[str, Any]) -> None:
        self.log_params(flatten_params(config))

    def set_tags(self, tags: dict[str, Any]) -> None:
        if tags:
            self.channel.submit({"op": "tags", "key": self.key, "tags": {k: str(v) for k, v in tags.items()}})

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

    def log_artifacts(self, local_path: str | Path, artifact_path: str | None = None) -> None:
        self.channel.submit({"op": "artifacts", "key": self.key, "local_path": str(local_path),
                             "artifact_path": artifact_path})

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
        self.flush()
        rep = self.report()
        if rep["pending"] or rep["rejected"]:
            self.channel._warn(f"{rep['pending']} record(s) still buffered in {rep['buffer']} "
                               f"({rep['rejected']} rejected); run `python -m agent_r1.tracking flush` "
                               f"when MLflow is reachable")
        return rep

    def ui_hint(self) -> str:
        uri = self.tracking_uri
        if uri.startswith("http"):
            return f"open {uri} in a browser"
        return "run `make ui` (or infra/mlflow/server.sh) and open http://127.0.0.1:5000"


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- the trainer's metrics sink ------------------------------------------------------------------
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


# --- `python -m agent_r1.tracking flush|status` ---------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m agent_r1.tracking", description="the MLflow record buffer")
    p.add_argument("action", choices=["flush", "status"])
    p.add_argument("--buffer", default=None, help="buffer folder (default <project>/mlruns/buffer)")
    p.add_argument("--tracking-uri", default=None)
    args = p.parse_args(argv)
    buffer = Path(args.buffer or os.environ.get("AGENT_R1_MLFLOW_BUFFER") or project_dir() / "mlruns" / "buffer")
    uri = args.tracking_uri or default_tracking_uri()
    channel = _Channel(uri, default_artifact_root(uri), buffer)
    if args.action == "flush":
        ok = channel.flush()
        print(json.dumps(channel.report(), indent=1))
        return 0 if ok else 1
    print(json.dumps(channel.report(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
