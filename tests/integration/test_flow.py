"""The `train-agent` Prefect flow end to end on a micro config, in this process against a real Prefect
server (the one test_deployment.py's two concurrent deployment runs use: tests/integration/conftest.py),
then the MLflow store read back; and task caching."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.mlflow_store import fresh_store
from tests.pipeline_helpers import write_micro_params


@pytest.fixture(scope="module")
def harness(prefect_server):
    """This process's flows report to the shared server; their logs and events are delivered before
    the module ends (as prefect_test_harness does), so none is sent after the server stops."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: prefect_server.api}):
        yield
        APILogWorker.drain_all(timeout=30)
        EventsWorker.drain_all(timeout=30)


@pytest.fixture()
def mlflow_store(tmp_path, monkeypatch):
    uri = fresh_store(tmp_path / "mlruns")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("AGENT_R1_MLFLOW_BUFFER", str(tmp_path / "buffer"))
    return uri


def _table(client, run_id: str, path: str) -> list[dict]:
    data = json.loads(Path(client.download_artifacts(run_id, path)).read_text())
    return [dict(zip(data["columns"], row)) for row in data["data"]]


def _old_run(out: Path) -> list[str]:
    """A previous run's history in the run folder: metrics and a checkpoint (its content is never read)."""
    old_metrics = [json.dumps({"step": s, "reward_mean": 0.5}) for s in range(8)]
    (out / "checkpoints" / "iter_000007").mkdir(parents=True)
    (out / "checkpoints" / "iter_000007" / "state.pt").write_bytes(b"old run")
    (out / "metrics.jsonl").write_text("\n".join(old_metrics) + "\n")
    return old_metrics


def test_flow_end_to_end_micro(harness, mlflow_store, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from agent_r1.tracking import RunTracker
    from flows.train_agent import train_agent

    # what the flow prints and returns is the redacted form, never the URI itself
    monkeypatch.setattr(RunTracker, "display_uri", property(lambda self: "http://***@mlflow.example:5000"))
    params = write_micro_params(tmp_path / "params.yaml", tmp_path)
    old_metrics = _old_run(tmp_path / "runs/default")
    cwd = os.getcwd()
    try:
        summary = train_agent(params=str(params), overrides={"train.eval_size": 3}, dvc="off", experiment="flow-test")
    finally:
        os.chdir(cwd)
    assert summary["tracking_uri"] == "http://***@mlflow.example:5000"
    # the old run moved aside as one folder: its metrics with its checkpoints
    (aside,) = (tmp_path / "runs/default/previous").iterdir()
    assert (aside / "metrics.jsonl").read_text().splitlines() == old_metrics
    assert (aside / "checkpoints/iter_000007/state.pt").read_bytes() == b"old run"
    assert list((tmp_path / "runs/default").glob("metrics.*.jsonl")) == []
    assert summary["iterations"] == 2 and summary["eval_questions"] == 3
    assert summary["tracking"]["pending"] == 0 and summary["tracking"]["rejected"] == 0
    assert (tmp_path / "runs/default/final_metrics.json").exists()
    assert (tmp_path / "runs/default/eval_metrics.json").exists()
    assert len((tmp_path / "runs/default/metrics.jsonl").read_text().splitlines()) == 3  # steps 0, 1, 2

    client = MlflowClient(tracking_uri=mlflow_store)
    parent = client.get_run(summary["mlflow_run_id"])
    assert parent.info.status == "FINISHED"
    p = parent.data.params
    assert p["model.hidden_size"] == "32" and p["train.iterations"] == "2" and p["train.eval_size"] == "3"
    assert p["algo.adv_estimator"] == "grpo" and p["data.n_people"] == "60"
    tags = parent.data.tags
    assert tags["engine.retrieval"] == "tantivy" and tags["machine.cpus"] and "index.corpus_sha1" in tags
    assert "git.commit" in tags and tags["data.via"] == "library"
    assert "final/test/rl/em" in parent.data.metrics

    children = {r.data.tags["stage"]: r for r in client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    assert set(children) == {"sft", "train", "evaluate"}
    assert all(r.info.status == "FINISHED" for r in children.values())
    assert client.get_metric_history(children["sft"].info.run_id, "sft/loss")

    train_id = children["train"].info.run_id
    assert [m.step for m in client.get_metric_history(train_id, "reward_mean")] == [1, 2]
    assert [m.step for m in client.get_metric_history(train_id, "eval/em")] == [0, 1, 2]
    assert client.get_metric_history(train_id, "policy_loss")
    ckpts = {a.path for a in client.list_artifacts(train_id, "checkpoints")}
    assert ckpts == {"checkpoints/iter_000001", "checkpoints/iter_000002"}
    files = {a.path.rsplit("/", 1)[-1] for a in client.list_artifacts(train_id, "checkpoints/iter_000002")}
    assert {"state.pt", "config.json"} <= files and any(f.endswith(".safetensors") for f in files)

    rows = _table(client, train_id, "trajectories/iter_000002.json")
    assert len(rows) == 3 * 2  # prompts_per_iter x n_samples
    questions = {json.loads(ln)["question"] for ln in (tmp_path / "data/synthetic/train.jsonl").read_text().splitlines()}
    assert all(r["question"] in questions and r["gold"] for r in rows)
    assert all(r["iteration"] == 2 and r["em"] in (0.0, 1.0) for r in rows)
    # real decoded text from the model, and the observation the tool returned for it
    assert any(r["turn1_action"].strip() for r in rows)
    assert all(isinstance(r["turn1_observation"], str) for r in rows)

    ev = _table(client, children["evaluate"].info.run_id, "evaluation.json")
    assert {(r["dataset"], r["model"]) for r in ev} == {("test", "rl"), ("test", "start")}

    # the evaluate step reused the trainer's held-out numbers: rolling out again gives the same ones
    from agent_r1.runs.run import Run

    reused = json.loads((tmp_path / "runs/default/eval_metrics.json").read_text())["test"]
    fresh = Run.load(tmp_path / "runs/default").evaluate(summary["checkpoint"], log=lambda _: None, reuse=False)["test"]
    assert reused["rl"]["source"] == "trainer" and "source" not in fresh["rl"]
    for label in ("rl", "start"):
        for key in ("em", "f1", "search_first_rate", "mean_turns"):
            assert fresh[label][key] == pytest.approx(reused[label][key]), (label, key)


def test_data_tasks_are_cached(harness, tmp_path):
    from prefect import flow

    from flows.train_agent import build_index, prepare_data

    from agent_r1.config import load_config
    from agent_r1.runs.run import Run

    cfg = load_config(write_micro_params(tmp_path / "params.yaml", tmp_path), {"train.out_dir": ""})
    runs = [str(Run.open(cfg, resolve_start=False, log=lambda _: None).folder) for _ in range(2)]

    @flow
    def data_only(run_dir: str) -> list[str]:
        d = prepare_data(run_dir, False, return_state=True)
        i = build_index(run_dir, d.result(), False, return_state=True)
        return [d.name, i.name]

    assert runs[0] != runs[1]
    assert data_only(runs[0]) == ["Completed", "Completed"]
    # another run with the same data and search settings: both steps skipped (keyed by the run's config)
    assert data_only(runs[1]) == ["Cached", "Cached"]
