"""The MLflow offline buffer against a real SQLite store: a line cut by a kill, a writer and a flusher
in two processes, a flush killed half-way and replayed, and records MLflow refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_r1.tracking import RecordBuffer, RunTracker, main
from tests.mlflow_store import fresh_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One SQLite store for the module (a copy of a migrated one: tests/mlflow_store.py); each test
    writes to an experiment of its own."""
    return fresh_store(tmp_path_factory.mktemp("store"))


def _buffer_run(buffer: Path, key: str, src: Path, experiment: str) -> None:
    """Every kind of record of one run, as an offline RunTracker would leave them."""
    src.write_text("weights")
    b = RecordBuffer(buffer)
    b.append({"op": "create_run", "key": key, "name": f"run-{key}", "experiment": experiment, "tags": {"t": "1"},
              "parent_key": None, "time_ms": 1_000})
    b.append({"op": "params", "key": key, "params": {"lr": "0.1"}})
    b.append({"op": "metrics", "key": key, "step": 1, "metrics": {"loss": 0.5}, "time_ms": 1_001})
    b.append({"op": "artifacts", "key": key, "local_path": str(src), "artifact_path": "ckpt"})
    b.append({"op": "table", "key": key, "columns": {"q": ["a", "b"]}, "artifact_file": "traj/t.json"})
    b.append({"op": "metrics", "key": key, "step": 2, "metrics": {"loss": 0.25}, "time_ms": 1_002})
    b.append({"op": "end", "key": key, "status": "FINISHED", "time_ms": 1_003})


def _the_run(uri: str, name: str, experiment: str):
    """The one MLflow run called `name` (asserting there is exactly one) with all it should hold."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"experiment {experiment!r} was never created"
    runs = client.search_runs([exp.experiment_id], f"attributes.run_name = '{name}'")
    assert len(runs) == 1, f"{len(runs)} MLflow runs named {name!r}: a replay must reuse the run"
    run = runs[0]
    assert run.data.params == {"lr": "0.1"} and run.data.tags["t"] == "1"
    assert run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "loss")
    assert sorted((m.step, m.value) for m in history)[:2] == [(1, 0.5), (2, 0.25)]
    assert "ckpt/weights.bin" in {a.path for a in client.list_artifacts(run.info.run_id, "ckpt")}
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "traj/t.json")).read_text())
    assert table["data"] == [["a"], ["b"]], "the table was sent twice"
    return client, run


def _flush(buffer: Path, uri: str) -> int:
    return main(["flush", "--buffer", str(buffer), "--tracking-uri", uri])


def _status(buffer: Path, uri: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "--buffer", str(buffer), "--tracking-uri", uri]) == 0
    return json.loads(capsys.readouterr().out)


def test_truncated_line_is_skipped_reported_and_set_aside(store, tmp_path, capsys):
    uri, buffer, exp = store, tmp_path / "buffer", "truncated"
    _buffer_run(buffer, "k1", tmp_path / "weights.bin", exp)
    with (buffer / "pending.jsonl").open("ab") as f:  # a writer killed in the middle of an append
        f.write(b'{"op": "metrics", "key": "k1", "step": 9, "metr')
    RecordBuffer(buffer).append({"op": "metrics", "key": "k1", "step": 3, "metrics": {"loss": 0.125}, "time_ms": 1_004})

    status = _status(buffer, uri, capsys)
    assert status["pending"] == 8 and status["partial_lines"] == 1
    later = RunTracker("later", experiment=exp, tracking_uri=uri, buffer_dir=buffer, verbose=False)
    later.close()
    assert _flush(buffer, uri) == 0

    client, run = _the_run(uri, "run-k1", exp)
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert sorted(steps) == [1, 2, 3], "the record appended after the cut line was lost"
    assert later.run_id and client.get_run(later.run_id).info.status == "FINISHED"
    rejected = [json.loads(line) for line in (buffer / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 1 and "unreadable line 8" in rejected[0]["error"]
    assert rejected[0]["raw"].startswith('{"op": "metrics", "key": "k1", "step": 9')
    after = _status(buffer, uri, capsys)
    assert after["pending"] == 0 and after["partial_lines"] == 0 and after["set_aside"] == 1


_WRITER = """
import sys, time
from pathlib import Path
from agent_r1.tracking import RecordBuffer
buffer, key, ready, done = sys.argv[1:5]
while not Path(ready).exists():
    time.sleep(0.01)
b = RecordBuffer(buffer)
for i in range(200):
    b.append({"op": "metrics", "key": key, "step": i, "metrics": {"i": float(i)}, "time_ms": 1000 + i})
    time.sleep(0.003)
Path(done).write_text("done")
"""

# MLflow's SQL store drops a repeated metric point, so the flusher also notes each step it sends:
# that note is what shows a record sent twice.
_FLUSHER = """
import sys
from pathlib import Path
import agent_r1.tracking as tracking
buffer, uri, ready, done, sent_log = sys.argv[1:6]
original = tracking.MlflowAdapter.send
def send(self, record, *args, **kwargs):
    out = original(self, record, *args, **kwargs)
    if record["op"] == "metrics":
        with open(sent_log, "a") as f:
            f.write(f"{record['step']}\\n")
    return out
tracking.MlflowAdapter.send = send
args = ["flush", "--buffer", buffer, "--tracking-uri", uri]
tracking.main(args)
Path(ready).write_text("ready")
while not Path(done).exists():
    tracking.main(args)
sys.exit(tracking.main(args))
"""


def test_concurrent_writer_and_flusher_lose_nothing(store, tmp_path):
    from mlflow.tracking import MlflowClient

    uri, buffer = store, tmp_path / "buffer"
    tracker = RunTracker("shared", experiment="concurrent", tracking_uri=uri, buffer_dir=buffer, verbose=False)
    ready, done, sent_log = tmp_path / "ready", tmp_path / "done", tmp_path / "sent.log"
    procs = [subprocess.Popen([sys.executable, "-c", _FLUSHER, str(buffer), uri, str(ready), str(done), str(sent_log)],
                              cwd=ROOT, stdout=subprocess.DEVNULL),
             subprocess.Popen([sys.executable, "-c", _WRITER, str(buffer), tracker.key, str(ready), str(done)],
                              cwd=ROOT)]
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0]
    stored = sorted(m.step for m in MlflowClient(tracking_uri=uri).get_metric_history(tracker.run_id, "i"))
    assert stored == list(range(200)), f"{200 - len(stored)} of 200 records lost"
    sent = [int(line) for line in sent_log.read_text().split()]
    assert sorted(sent) == list(range(200)), f"{len(sent) - len(set(sent))} records sent twice"
    assert RecordBuffer(buffer).pending() == []


_KILLED_FLUSH = """
import os, sys
import agent_r1.tracking as tracking
op, buffer, uri = sys.argv[1:4]
original = tracking.MlflowAdapter.send
def send(self, record, *args, **kwargs):
    out = original(self, record, *args, **kwargs)
    if record["op"] == op:  # MLflow has taken it; the flush dies before it can note so
        os.kill(os.getpid(), 9)
    return out
tracking.MlflowAdapter.send = send
tracking.main(["flush", "--buffer", buffer, "--tracking-uri", uri])
"""


@pytest.mark.parametrize("kill_after", ["create_run", "artifacts", "table"])
def test_flush_killed_midway_replays_without_duplicates(store, tmp_path, kill_after):
    uri, buffer, exp = store, tmp_path / "buffer", f"killed-after-{kill_after}"
    _buffer_run(buffer, "k1", tmp_path / "weights.bin", exp)
    killed = subprocess.run([sys.executable, "-c", _KILLED_FLUSH, kill_after, str(buffer), uri], cwd=ROOT,
                            capture_output=True, timeout=240)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    assert _flush(buffer, uri) == 0
    _the_run(uri, "run-k1", exp)
    assert RecordBuffer(buffer).pending() == []
    assert not list((buffer / "blobs").iterdir()), "a sent artifact copy was left behind"


_KILLED_SEND = """
import os, sys
import agent_r1.tracking as tracking
buffer, uri = sys.argv[1:3]
original = tracking.MlflowAdapter.send
def send(self, record, *args, **kwargs):
    if record["op"] == "params":  # the process dies while it sends the record
        os.kill(os.getpid(), 9)
    return original(self, record, *args, **kwargs)
tracking.MlflowAdapter.send = send
tracker = tracking.RunTracker("killed-send", experiment="killed-send", tracking_uri=uri, buffer_dir=buffer, verbose=False)
tracker.log_params({"lr": "0.1"})
"""


def test_a_record_being_sent_when_its_process_is_killed_is_sent_by_the_next_flush(store, tmp_path):
    """A record is written to the buffer before it is sent, so a process killed in the middle of the
    send loses nothing: the next flush delivers it."""
    from mlflow.tracking import MlflowClient

    buffer = tmp_path / "buffer"
    killed = subprocess.run([sys.executable, "-c", _KILLED_SEND, str(buffer), store], cwd=ROOT, capture_output=True,
                            timeout=240)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    assert [r["op"] for r in RecordBuffer(buffer).pending()] == ["params"]
    assert _flush(buffer, store) == 0
    client = MlflowClient(tracking_uri=store)
    (run,) = client.search_runs([client.get_experiment_by_name("killed-send").experiment_id])
    assert run.data.params == {"lr": "0.1"} and RecordBuffer(buffer).pending() == []


def test_poison_records_are_set_aside_and_the_rest_flushed(store, tmp_path):
    uri, buffer = store, tmp_path / "buffer"
    b = RecordBuffer(buffer)
    b.append({"op": "create_run", "key": "bad", "name": "nameless-experiment", "experiment": "", "tags": {},
              "parent_key": None, "time_ms": 1_000})
    b.append({"op": "metrics", "key": "bad", "step": 1, "metrics": {"loss": 1.0}, "time_ms": 1_001})
    b.append({"op": "bogus", "key": "bad"})
    _buffer_run(buffer, "good", tmp_path / "weights.bin", "poison")
    b.append({"op": "end", "key": "bad", "status": "FINISHED", "time_ms": 1_002})

    assert _flush(buffer, uri) == 0
    _the_run(uri, "run-good", "poison")
    assert RecordBuffer(buffer).pending() == []
    rejected = [json.loads(line) for line in (buffer / "rejected.jsonl").read_text().splitlines()]
    assert [r["op"] for r in rejected] == ["create_run", "metrics", "bogus", "end"]
    assert "'experiment' must be a non-empty string" in rejected[0]["error"]  # refused before it is sent
    assert all("refused by MLflow" in r["error"] for r in (rejected[1], rejected[3]))
    assert "unknown tracking record op 'bogus'" in rejected[2]["error"]


def test_a_runs_report_counts_its_own_records_not_another_process_s(store, tmp_path):
    """The buffer is shared: a record another process queued while it holds the flush lock is not this
    run's undelivered work (two deployment runs at once: one's report said 12 pending, all the other's)."""
    from agent_r1.filelock import FileLock

    buffer = tmp_path / "buffer"
    mine = RunTracker("mine", experiment="own-report", tracking_uri=store, buffer_dir=buffer, verbose=False)
    theirs = RunTracker("theirs", experiment="own-report", tracking_uri=store, buffer_dir=buffer, verbose=False)
    mine.log_metrics({"loss": 1.0}, step=1)
    sending = FileLock(buffer / ".flush.lock")  # the other process, in the middle of a send
    assert sending.acquire(blocking=False)
    RecordBuffer(buffer).append({"op": "tags", "key": theirs.key, "tags": {"t": "x"}})
    report = mine.report()
    assert report["pending"] == 0 and report["pending_in_buffer"] == 1  # its record, not mine
    sending.release()
    assert theirs.close()["pending"] == 0 and mine.close()["pending"] == 0
    assert not RecordBuffer(buffer).pending()  # delivered: the other process's queued one included
