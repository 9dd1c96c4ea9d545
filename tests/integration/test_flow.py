"""The `train-agent` Prefect flow end to end on a micro config, then the MLflow store read back; task
caching; and the deployment `train-agent/local` triggered by name against a started Prefect server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.pipeline_helpers import write_micro_params

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture()
def mlflow_store(tmp_path, monkeypatch):
    store = tmp_path / "mlruns"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
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

    # what the flow prints and returns is the redacted form (issue 15 item 9), never the URI itself
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


def test_two_flow_runs_never_collide(harness, mlflow_store, tmp_path):
    """Issue 17's sequence: run A, then run B with other overrides, through the flow. Each keeps its
    own folder, final checkpoint, MLflow run and evaluation; B reuses A's warm start."""
    import yaml
    from mlflow.tracking import MlflowClient

    from agent_r1.runs.folders import list_runs, read_record
    from agent_r1.runs.lineage import checkpoint_hash
    from flows.train_agent import train_agent

    params = write_micro_params(tmp_path / "params.yaml", tmp_path)
    tree = yaml.safe_load(params.read_text())
    tree["sft"]["out_dir"], tree["train"]["out_dir"], tree["train"]["init_from"] = "", "", "sft"
    tree["train"]["runs_dir"] = str(tmp_path / "runs")
    params.write_text(yaml.safe_dump(tree))
    cwd = os.getcwd()
    try:
        a = train_agent(params=str(params), overrides={"train.eval_size": 3}, dvc="off", experiment="collide")
        a_hash = checkpoint_hash(a["checkpoint"])
        b = train_agent(params=str(params), dvc="off", experiment="collide",
                        overrides={"train.eval_size": 3, "algo.adv_estimator": "rloo", "train.iterations": 3})
    finally:
        os.chdir(cwd)
    runs = {r["name"]: r for r in list_runs(tmp_path / "runs", "collide")}
    assert len(runs) == 2 and {Path(a["run_dir"]).name, Path(b["run_dir"]).name} == set(runs)
    client = MlflowClient(tracking_uri=mlflow_store)
    for summary, iters in ((a, 2), (b, 3)):
        folder = Path(summary["run_dir"])
        card = read_record(folder)
        # its own final checkpoint, intact after the other run, in its own folder, hashed on its card
        assert Path(summary["checkpoint"]).resolve().parent == folder.resolve() / "checkpoints"
        assert summary["checkpoint"].endswith(f"iter_{iters:06d}")
        assert checkpoint_hash(summary["checkpoint"]) == card["checkpoint_sha256"] == summary["checkpoint_sha256"]
        # the evaluate stage scored exactly that checkpoint: its EM is the trainer's own final held-out EM
        assert summary["final_em"] == summary["trainer_final_eval_em"] == card["final_eval_em"]
        assert card["evaluation"]["test"]["rl"] == summary["final_em"] and card["status"] == "finished"
        run = client.get_run(summary["mlflow_run_id"])
        assert card["mlflow_run_id"] == run.info.run_id and run.info.run_name == folder.name
        tags = run.data.tags
        assert tags["run.dir"] == str(folder) and tags["checkpoint.sha256"] == card["checkpoint_sha256"]
        assert {tags[f"lineage.{k}"] for k in ("data", "index", "warm_start", "checkpoint")} == \
            {card["lineage"][k] for k in ("data", "index", "warm_start", "checkpoint")}
        evaluate = client.search_runs([run.info.experiment_id], f"tags.mlflow.parentRunId = '{run.info.run_id}' "
                                      "and tags.stage = 'evaluate'")[0]
        assert evaluate.data.tags["checkpoint.sha256"] == card["checkpoint_sha256"]
    assert checkpoint_hash(a["checkpoint"]) == a_hash
    assert a["lineage"]["warm_start"] == b["lineage"]["warm_start"] and a["lineage"]["data"] == b["lineage"]["data"]
    # the warm start: trained by A, reused by B (one folder in the store)
    sft_runs = {r.data.tags["mlflow.parentRunId"]: r for r in client.search_runs(
        [client.get_experiment_by_name("collide").experiment_id], "tags.stage = 'sft'")}
    assert sft_runs[a["mlflow_run_id"]].data.tags["warm_start.reused"] == "false"
    assert sft_runs[b["mlflow_run_id"]].data.tags["warm_start.reused"] == "true"
    assert len([p for p in (tmp_path / "runs/warm_starts").iterdir() if p.is_dir()]) == 1


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
