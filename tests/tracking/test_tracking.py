"""MLflow tracking: params/metrics/tables/artifacts read back from a real store, and nothing lost
while MLflow is unreachable (a closed port, then a real `mlflow server` on that port)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_r1.tracking import (MlflowSink, RunTracker, dvc_lock_hashes, flatten_params, trajectory_rows)
from agent_r1.trajectory import Trajectory, Turn
from tests.mlflow_server import start_mlflow_server, stop
from tests.mlflow_store import fresh_store
from tests.servers import free_port


def _traj(answer: str = "Paris") -> Trajectory:
    return Trajectory(
        sample_id="q1", prompt_ids=[1, 2, 3],
        turns=[Turn(action_ids=[4, 5], action_logprobs=[-0.1, -0.2], action_text="<search>capital of France</search>",
                    observation_text="Paris is the capital of France.", process_reward=0.1, tool_calls=1,
                    valid_tool_calls=1),
               Turn(action_ids=[6], action_logprobs=[-0.3], action_text=f"<answer>{answer}</answer>")],
        answer=answer, outcome_reward=1.0 if answer == "Paris" else 0.0, stop_reason="answer",
        sample={"question": "What is the capital of France?", "answers": ["Paris"]})


def test_flatten_params_and_rows():
    flat = flatten_params({"train": {"lr": 0.001, "iterations": 3}, "data": {"types": ["a", "b"]}, "x": None})
    assert flat == {"train.lr": "0.001", "train.iterations": "3", "data.types": '["a", "b"]', "x": ""}
    rows = trajectory_rows(7, [_traj(), _traj("Lyon")])
    assert rows[0]["question"] == "What is the capital of France?" and rows[0]["gold"] == "Paris"
    assert rows[0]["em"] == 1.0 and rows[1]["em"] == 0.0
    assert rows[0]["turn1_action"].startswith("<search>") and "capital" in rows[0]["turn1_observation"]
    assert rows[0]["turn1_process_reward"] == pytest.approx(0.1) and rows[0]["process_reward"] == pytest.approx(0.1)
    assert rows[0]["iteration"] == 7 and "[observation 1]" in rows[0]["transcript"]


def test_dvc_lock_hashes(tmp_path):
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  prepare:\n    cmd: x\n    outs:\n    - path: data/synthetic\n"
        "      hash: md5\n      md5: abc.dir\n  index:\n    cmd: y\n    outs:\n    - path: data/index\n"
        "      hash: md5\n      md5: def.dir\n")
    assert dvc_lock_hashes(tmp_path) == {"dvc.prepare.data/synthetic": "abc.dir", "dvc.index.data/index": "def.dir"}
    assert dvc_lock_hashes(tmp_path, stages=["index"]) == {"dvc.index.data/index": "def.dir"}
    assert dvc_lock_hashes(tmp_path / "nowhere") == {}


def _log_everything(tracker: RunTracker, ckpt_root: Path) -> MlflowSink:
    tracker.log_config({"train": {"lr": 0.01, "iterations": 2}, "seed": 0})
    tracker.set_tags({"git.commit": "abc"})
    child = tracker.child("train", tags={"stage": "train"})
    sink = MlflowSink(child, checkpoints_dir=ckpt_root)
    for step in (1, 2):
        sink.log(step, {"reward_mean": 0.1 * step, "eval/em": 10.0 * step})
    sink.log_trajectories(2, [_traj(), _traj("Lyon")])
    (ckpt_root / "iter_000002").mkdir(parents=True)
    (ckpt_root / "iter_000002" / "state.pt").write_bytes(b"state")
    (ckpt_root / "iter_000002" / "model.safetensors").write_bytes(b"weights")
    assert sink.log_checkpoints() == ["iter_000002"]
    child.end()
    return sink


def _check_store(uri: str, parent_id: str) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(parent_id)
    assert parent.data.params["train.lr"] == "0.01" and parent.data.tags["git.commit"] == "abc"
    assert parent.info.status == "FINISHED"
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    assert len(children) == 1
    child = children[0]
    assert child.info.status == "FINISHED"
    history = client.get_metric_history(child.info.run_id, "reward_mean")
    assert [(m.step, round(m.value, 3)) for m in history] == [(1, 0.1), (2, 0.2)]
    assert [m.value for m in client.get_metric_history(child.info.run_id, "eval/em")] == [10.0, 20.0]
    arts = {a.path for a in client.list_artifacts(child.info.run_id, "checkpoints/iter_000002")}
    assert "checkpoints/iter_000002/state.pt" in arts
    table = client.download_artifacts(child.info.run_id, "trajectories/iter_000002.json")
    data = json.loads(Path(table).read_text())
    cols = data["columns"]
    rows = [dict(zip(cols, r)) for r in data["data"]]
    assert rows[0]["question"] == "What is the capital of France?"
    assert rows[0]["turn1_action"] == "<search>capital of France</search>" and rows[1]["answer"] == "Lyon"


def test_sqlite_store_round_trip(tmp_path):
    uri = fresh_store(tmp_path / "store")
    tracker = RunTracker("unit", experiment="unit", tracking_uri=uri, buffer_dir=tmp_path / "buffer")
    assert tracker.run_id
    _log_everything(tracker, tmp_path / "ckpts")
    report = tracker.close()
    assert report["pending"] == 0 and report["buffered"] == 0 and report["rejected"] == 0
    _check_store(uri, tracker.run_id)
    # artifacts live next to the SQLite file, not in the project
    assert (tmp_path / "store" / "artifacts").is_dir()


def test_unreachable_server_buffers_then_flushes(tmp_path):
    port = free_port()  # nothing listens here yet
    uri = f"http://127.0.0.1:{port}"
    buffer = tmp_path / "buffer"
    started = time.monotonic()
    tracker = RunTracker("offline", experiment="unit", tracking_uri=uri, buffer_dir=buffer, verbose=False)
    ckpts = tmp_path / "ckpts"
    _log_everything(tracker, ckpts)
    assert time.monotonic() - started < 60, "a down server must not stall training"
    assert tracker.run_id is None
    rep = tracker.report()
    assert rep["offline"] and rep["sent"] == 0 and rep["pending"] == rep["buffered"] >= 9
    assert "127.0.0.1" in rep["last_error"] or rep["last_error"]
    # the checkpoint is copied into the buffer: pruning the original loses nothing
    import shutil

    shutil.rmtree(ckpts)
    tracker.end()
    assert tracker.report()["pending"] == rep["pending"] + 1

    # MLflow comes back on that very port
    server = start_mlflow_server(port, tmp_path / "server")
    try:
        tracker.mlflow.retry_at = 0.0  # do not wait for the back-off in a test
        assert tracker.flush()
        rep = tracker.report()
        assert rep["pending"] == 0 and rep["flushed"] == rep["buffered"] and not rep["offline"]
        assert tracker.run_id
        _check_store(uri, tracker.run_id)
        assert not list((buffer / "blobs").iterdir())  # copies are removed once sent
    finally:
        stop(server)


def test_a_fresh_test_store_keeps_its_default_experiments_artifacts_in_its_own_folder(tmp_path):
    """Every copy of the migrated template keeps experiment 0's artifacts beside its own database, not
    in the folder the template was first made from (the repository, when a worker made it there: an
    artifact logged to experiment 0 then landed in the repository's mlruns/)."""
    from mlflow.tracking import MlflowClient

    uri = fresh_store(tmp_path / "store")
    location = MlflowClient(tracking_uri=uri).get_experiment("0").artifact_location
    assert location == str(tmp_path / "store" / "mlruns" / "0"), location
