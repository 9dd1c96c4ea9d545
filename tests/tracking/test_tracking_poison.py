"""A record the tracking store refuses for any reason that is not the network is set aside with its
reason and never blocks the queue; a record is journalled before it is attempted, so
the replay of one whose reply was lost is idempotent. Against a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.tracking import RecordBuffer, RunTracker, main
from tests.mlflow_store import fresh_store
from tests.tracking.test_tracking_buffer import _buffer_run, _the_run

SURROGATE = "\udcff"  # a lone surrogate: Python's JSON reader makes one from "\\udcff"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return fresh_store(tmp_path_factory.mktemp("store"))


def _bad_records(key: str, experiment: str) -> list[tuple[str, dict]]:
    """(what is wrong, record): each one MLflow (or the client) can never take."""
    run = {"op": "create_run", "key": key, "name": "poisoned", "experiment": experiment, "tags": {},
           "parent_key": None, "time_ms": 1_000}
    return [
        ("surrogate in a param", {"op": "params", "key": key, "params": {"q": f"a{SURROGATE}b"}}),
        ("surrogate in a tag key", {"op": "tags", "key": key, "tags": {f"t{SURROGATE}": "1"}}),
        ("surrogate in a table", {"op": "table", "key": key, "columns": {"q": [SURROGATE]},
                                  "artifact_file": "traj/s.json"}),
        ("params as a list", {"op": "params", "key": key, "params": ["lr", "0.1"]}),
        ("tags as a string", {"op": "tags", "key": key, "tags": "t=1"}),
        ("metrics as a list", {"op": "metrics", "key": key, "metrics": [1.0], "step": 1, "time_ms": 1}),
        ("step as text", {"op": "metrics", "key": key, "metrics": {"m": 1.0}, "step": "one", "time_ms": 1}),
        ("columns as a string", {"op": "table", "key": key, "columns": "q", "artifact_file": "traj/c.json"}),
        ("status as a number", {"op": "end", "key": key, "status": 3, "time_ms": 1}),
        ("experiment as an object", {**run, "key": key + "-exp", "experiment": {"name": experiment}}),
        ("name with a surrogate", {**run, "key": key + "-name", "name": f"r{SURROGATE}"}),
    ], run


def test_refused_records_are_set_aside_and_never_block_the_buffer(store, tmp_path):
    uri, buffer, exp = store, tmp_path / "buffer", "poison-shapes"
    bad, run = _bad_records("p", exp)
    buffer.mkdir()
    # as a hand edit (or another version) could leave them: a number where the artifact path goes too
    lines = [run, *(record for _, record in bad), {"op": "artifacts", "key": "p", "local_path": 7, "blob": True}]
    (buffer / "pending.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    _buffer_run(buffer, "good", tmp_path / "weights.bin", exp)

    assert main(["flush", "--buffer", str(buffer), "--tracking-uri", uri]) == 0
    _the_run(uri, "run-good", exp)
    assert RecordBuffer(buffer).pending() == []
    rejected = [json.loads(line) for line in (buffer / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == len(bad) + 1, [r["error"] for r in rejected]
    assert all(r["error"] for r in rejected)
    assert sum("surrogate" in r["error"] for r in rejected) >= 4, [r["error"] for r in rejected]


def test_a_refused_record_sent_directly_does_not_take_mlflow_offline(store, tmp_path):
    """The same records from a live tracker: each is set aside, MLflow is not reported down, and the
    records after them are sent at once (none left pending)."""
    tracker = RunTracker("direct", experiment="poison-direct", tracking_uri=store, buffer_dir=tmp_path / "buffer",
                         verbose=False)
    for what, record in _bad_records(tracker.key, "poison-direct")[0]:
        tracker.mlflow.submit(record)
        assert not tracker.report()["offline"], f"{what} was taken for MLflow being down"
    tracker.mlflow.submit({"op": "artifacts", "key": tracker.key, "local_path": 7})
    tracker.log_params({"lr": "0.1"})
    tracker.log_metrics({"loss": 0.5}, 1)
    rep = tracker.close()
    assert not rep["offline"] and rep["pending"] == 0 and rep["buffered"] == 0, rep
    assert rep["rejected"] == len(_bad_records("x", "x")[0]) + 1, rep
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=store).get_run(tracker.run_id)
    assert run.data.params == {"lr": "0.1"} and run.info.status == "FINISHED"


class _ReplyLost(ConnectionError):
    pass


def test_a_record_whose_reply_was_lost_is_replayed_once(store, tmp_path, monkeypatch):
    """MLflow commits a run creation and a table, then the connection drops before the reply: the replay
    must find what was committed, not make a second run (one stuck RUNNING) or a doubled table."""
    from mlflow.tracking import MlflowClient

    from agent_r1.tracking.adapter import RUN_KEY_TAG, MlflowAdapter

    real_send, lost = MlflowAdapter.send, {"create_run", "table"}

    def send(self, record):
        out = real_send(self, record)  # MLflow commits ...
        if record["op"] in lost:
            lost.discard(record["op"])
            raise _ReplyLost("connection reset after the request was sent")  # ... and the reply is lost
        return out

    monkeypatch.setattr(MlflowAdapter, "send", send)
    tracker = RunTracker("lost-reply", experiment="reply-lost", tracking_uri=store, buffer_dir=tmp_path / "buffer",
                         verbose=False)
    for log in (lambda: tracker.log_table([{"q": "a"}, {"q": "b"}], "traj/t.json"),
                lambda: tracker.log_params({"lr": "0.1"})):
        tracker.mlflow.retry_at = 0.0  # retry at once (the back-off is for real outages)
        log()
    tracker.mlflow.retry_at = 0.0
    rep = tracker.close()
    assert not lost, "the test did not lose both replies"
    assert rep["pending"] == 0 and rep["rejected"] == 0, rep

    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name("reply-lost")
    runs = client.search_runs([exp.experiment_id], f"tags.`{RUN_KEY_TAG}` = '{tracker.key}'")
    assert len(runs) == 1, f"{len(runs)} MLflow runs carry one run key"
    assert runs[0].info.status == "FINISHED" and runs[0].data.params == {"lr": "0.1"}
    table = json.loads(Path(client.download_artifacts(runs[0].info.run_id, "traj/t.json")).read_text())
    assert table["data"] == [["a"], ["b"]], "the table rows were doubled"


@pytest.mark.parametrize("content", ['["k", "run-id"]', '{"k": 5}', '"runs"'])
def test_a_run_map_of_the_wrong_shape_is_refused_naming_the_file(tmp_path, content):
    """runs.json is a file anyone can edit: a shape other than {run key: MLflow run id} is refused with the
    file named (it used to come back as a list or a string and crash the tracker on its first lookup)."""
    buffer = tmp_path / "buffer"
    buffer.mkdir()
    (buffer / "runs.json").write_text(content)
    with pytest.raises(ValueError, match="runs.json"):
        RecordBuffer(buffer).run_ids()


def test_a_trace_of_a_call_with_a_lone_surrogate_is_still_sendable():
    """A model writing "\\udcff" inside a hermes call's JSON: the parsed arguments hold a
    lone surrogate. The trace record replaces it, so the trace is delivered rather than set aside."""
    from types import SimpleNamespace

    from agent_r1.tracking.traces import trace_record

    turn = SimpleNamespace(info={"calls": [{"name": f"search{SURROGATE}", "arguments": {"query": f"a{SURROGATE}"},
                                            "ok": False, "error": f"bad {SURROGATE}"}]},
                           action_ids=[1, 2], observation_ids=[3], truncated=False, masked=False, process_reward=0.0,
                           tool_calls=1, valid_tool_calls=0, observation_text=f"Error: {SURROGATE}",
                           observation_truncated=False, action_text="<tool_call>...</tool_call>")
    traj = SimpleNamespace(sample={"question": "Q?", "answers": ["a"]}, turns=[turn], prompt_ids=[0], sample_id="s1",
                           answer=None, outcome_reward=0.0, score=0.0, stop_reason="max_turns", num_action_tokens=2)
    record = trace_record("run", "exp", 1, 0, traj, end_ns=10**18)
    text = json.dumps(record, ensure_ascii=False)
    text.encode("utf-8")  # raised UnicodeEncodeError ("surrogates not allowed") before
    assert "a\ufffd" in text or "a?" in text


@pytest.mark.parametrize("record", ["a string", ["a", "list"], 42, None])
def test_a_record_that_is_no_mapping_is_set_aside_not_raised(store, tmp_path, record):
    tracker = RunTracker("not-a-mapping", experiment="poison-direct", tracking_uri=store,
                         buffer_dir=tmp_path / "buffer", verbose=False)
    tracker.mlflow.submit(record)  # raised AttributeError / TypeError from the rejection path before
    rep = tracker.close()
    assert rep["rejected"] == 1 and rep["pending"] == 0 and not rep["offline"], rep
    (line,) = (tmp_path / "buffer" / "rejected.jsonl").read_text().splitlines()
    assert "must be a JSON object" in json.loads(line)["error"]
