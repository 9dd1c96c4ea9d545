"""Two runs of the deployment `train-agent/local` at once, through a real Prefect server (shared with
test_flow.py: tests/integration/conftest.py) and `flows/serve.py --limit 2`: each run gets its own run
folder, its own MLflow runs, lineage and checkpoint, and neither touches the other's; the two really
overlap in time; the SFT warm start they share is trained once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.pipeline_helpers import write_micro_params
from tests.servers import stop

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ALGOS = ("grpo", "rloo")  # run A, run B: told apart by their params
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _params(tmp_path: Path) -> Path:
    """The micro params with nothing pinned: each run makes its own folder under tmp/runs, and the
    warm start goes to the shared store (runs/warm_starts/<hash>) instead of a fixed folder."""
    path = write_micro_params(tmp_path / "params.yaml", tmp_path)
    tree = yaml.safe_load(path.read_text())
    tree["sft"]["out_dir"] = ""
    tree["train"].update(out_dir="", init_from="sft", runs_dir=str(tmp_path / "runs"), eval_size=2)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def _api_get(api: str, path: str) -> dict:
    with urllib.request.urlopen(f"{api}{path}", timeout=10) as r:
        return json.loads(r.read())


def _wait_deployment(api: str, serve: subprocess.Popen, log: Path, timeout: float) -> None:
    """Until the server knows the deployment `flows/serve.py` registers (asked over HTTP: a `prefect deployment
    inspect` process per poll cost seconds of CPU that the starting serve process needed)."""
    deadline = time.monotonic() + timeout
    while True:
        assert serve.poll() is None, log.read_text()[-3000:]
        try:
            _api_get(api, "/deployments/name/train-agent/local")
            return
        except urllib.error.HTTPError as err:
            assert err.code == 404, err
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)


def _trigger_both(env: dict) -> dict[str, str]:
    """Both deployment runs requested at the same moment (two CLI processes); algo -> flow run id."""
    procs = {algo: subprocess.Popen(
        [str(VENV_BIN / "prefect"), "deployment", "run", "train-agent/local", "-p", "dvc=off",
         "-p", "overrides=" + json.dumps({"algo.adv_estimator": algo})],
        env={**env, "COLUMNS": "200"}, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for algo in ALGOS}
    ids = {}
    for algo, proc in procs.items():
        out = proc.communicate(timeout=120)[0]
        found = UUID.findall(out.split("UUID:", 1)[-1])
        assert proc.returncode == 0 and found, out[-2000:]
        ids[algo] = found[0]
    return ids


def _wait_runs(api: str, ids: dict[str, str], serve_log: Path, timeout: float) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        runs = {algo: _api_get(api, f"/flow_runs/{fid}") for algo, fid in ids.items()}
        if all(r["state_type"] in TERMINAL for r in runs.values()):
            return runs
        assert time.monotonic() < deadline, ({a: r["state_type"] for a, r in runs.items()},
                                             serve_log.read_text()[-4000:])
        time.sleep(1)


def _summaries(serve_log: Path) -> dict[str, dict]:
    """What each flow run returned (its `done: {...}` log line), by MLflow run id."""
    done = [json.loads(line.split(" - done: ", 1)[1]) for line in serve_log.read_text().splitlines()
            if " - done: {" in line]
    return {s["mlflow_run_id"]: s for s in done}


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


@pytest.mark.slow
def test_two_deployment_runs_at_once(tmp_path, prefect_server):
    started = time.perf_counter()
    api = prefect_server.api
    mlflow_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": api,
           # the served flow asks for scheduled runs every second, not every 10 s (Prefect's default): a
           # triggered run starts at once instead of waiting for the next poll
           "PREFECT_RUNNER_POLL_FREQUENCY": "1",
           "MLFLOW_TRACKING_URI": mlflow_uri, "AGENT_R1_MLFLOW_BUFFER": str(tmp_path / "buffer"),
           "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    params = _params(tmp_path)
    runs_dir = tmp_path / "runs"
    logs = {"serve": tmp_path / "serve.log"}
    files = {name: path.open("w") for name, path in logs.items()}
    procs = []
    try:
        # nothing is made beforehand: both runs start on a fresh data folder, index and MLflow store,
        # which they build under locks (runs/assembly.py, tracking/adapter.py) once between them
        procs.append(subprocess.Popen([sys.executable, "-m", "flows.serve", "--params", str(params), "--limit", "2"],
                                      env=env, cwd=ROOT, stdout=files["serve"], stderr=subprocess.STDOUT,
                                      start_new_session=True))
        _wait_deployment(api, procs[0], logs["serve"], 180)
        ids = _trigger_both(env)
        flow_runs = _wait_runs(api, ids, logs["serve"], 900)
        for algo, fr in flow_runs.items():
            assert fr["state_type"] == "COMPLETED", (algo, fr["state_name"], logs["serve"].read_text()[-6000:])
        assert logs["serve"].read_text().count("iter 2/2") == 2  # each run's per-iteration progress lines

        # they ran at once: each started before the other ended (the limit let both through)
        (a, b) = flow_runs.values()
        assert max(_ts(a["start_time"]), _ts(b["start_time"])) < min(_ts(a["end_time"]), _ts(b["end_time"]))

        # MLflow: one parent run per flow run, each finished, with its own params, folder and checkpoint
        from mlflow.tracking import MlflowClient

        from agent_r1.runs.folders import list_runs
        from agent_r1.runs.lineage import checkpoint_hash

        client = MlflowClient(tracking_uri=mlflow_uri)
        exp = client.get_experiment_by_name("agent-r1")
        parents = client.search_runs([exp.experiment_id], "tags.pipeline = 'train-agent'")
        assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
        by_algo = {p.data.params["algo.adv_estimator"]: p for p in parents}
        assert set(by_algo) == set(ALGOS)
        # overlap is proven by the Prefect flow-run times above; an MLflow run starts only after its
        # flow's imports, so on a loaded machine one micro run may end before the other's MLflow run starts

        summaries = _summaries(logs["serve"])
        assert set(summaries) == {p.info.run_id for p in parents}
        folders = {}
        sft_children = []
        for algo, parent in by_algo.items():
            tags = parent.data.tags
            assert tags["prefect.flow_run_id"] == ids[algo]
            folder = Path(tags["run.dir"])
            folders[algo] = folder
            assert folder.parent == runs_dir / "agent-r1"
            assert folder.name in (flow_runs[algo]["name"], f"{flow_runs[algo]['name']}-2")  # named on its flow run
            card = json.loads((folder / "run.json").read_text())
            assert card["status"] == "finished" and card["iterations"] == 2
            assert card["mlflow_run_id"] == parent.info.run_id and card["prefect_flow_run_id"] == ids[algo]
            checkpoint = Path(card["checkpoint"])
            assert checkpoint.is_dir() and checkpoint.parent == folder / "checkpoints"
            assert tags["checkpoint.sha256"] == card["checkpoint_sha256"]
            summary = summaries[parent.info.run_id]  # what the flow returned agrees with its card
            assert summary["run_dir"] == str(folder) and summary["checkpoint"] == card["checkpoint"]
            assert summary["checkpoint_sha256"] == card["checkpoint_sha256"]
            assert summary["final_em"] == card["evaluation"][summary["eval_set"]]["rl"]
            assert summary["trainer_final_eval_em"] == card["final_eval_em"]
            assert summary["tracking"]["pending"] == 0 and summary["tracking"]["rejected"] == 0
            # the evaluate stage scored exactly this checkpoint: its EM is the trainer's final held-out EM
            assert summary["final_em"] == summary["trainer_final_eval_em"]
            # the checkpoint on disk, read after both runs ended, is still the one its card hashed
            assert checkpoint_hash(card["checkpoint"]) == card["checkpoint_sha256"]
            assert parent.info.run_name == folder.name
            assert all(tags[f"lineage.{k}"] == card["lineage"][k] for k in ("data", "index", "warm_start", "checkpoint"))
            config = json.loads((folder / "config.json").read_text())
            assert config["algo"]["adv_estimator"] == algo and config["train"]["out_dir"] == str(folder)

            children = {r.data.tags["stage"]: r for r in client.search_runs(
                [exp.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
            assert set(children) == {"sft", "train", "evaluate"}
            assert all(r.info.status == "FINISHED" for r in children.values())
            # the evaluate stage scored this run's own checkpoint, not the other's
            assert children["evaluate"].data.tags["checkpoint.sha256"] == card["checkpoint_sha256"]
            assert children["evaluate"].data.tags["checkpoint"] == card["checkpoint"]
            assert {a.path for a in client.list_artifacts(children["train"].info.run_id, "checkpoints")} == \
                {"checkpoints/iter_000001", "checkpoints/iter_000002"}
            sft_children.append(children["sft"])

        # two folders, nothing of one in the other
        assert folders["grpo"] != folders["rloo"]
        assert {r["name"] for r in list_runs(runs_dir, "agent-r1")} == {f.name for f in folders.values()}
        assert sorted(p.name for p in (runs_dir / "agent-r1").iterdir()) == sorted(f.name for f in folders.values())
        for algo, folder in folders.items():
            other = folders[ALGOS[1 - ALGOS.index(algo)]]
            text = (folder / "run.json").read_text() + (folder / "config.json").read_text()
            assert str(other) not in text and by_algo[ALGOS[1 - ALGOS.index(algo)]].info.run_id not in text
        a_sha, b_sha = (json.loads((f / "run.json").read_text())["checkpoint_sha256"] for f in folders.values())
        assert a_sha != b_sha  # two checkpoints, not one shared

        # the warm start both needed at once was trained once, by one of them, and reused by the other
        stored = [p for p in (runs_dir / "warm_starts").iterdir() if not p.name.startswith(".")]
        assert len(stored) == 1 and stored[0].is_dir() and (stored[0] / "warm_start.json").is_file()
        assert sorted(r.data.tags["warm_start.reused"] for r in sft_children) == ["false", "true"]
        assert {r.data.tags["warm_start.hash"][:len(stored[0].name)] for r in sft_children} == {stored[0].name}
        lineages = [json.loads((folder / "run.json").read_text())["lineage"] for folder in folders.values()]
        assert all(lineage["warm_start"].startswith(stored[0].name) for lineage in lineages)
        assert lineages[0]["data"] == lineages[1]["data"]  # the data both built at once, once
    finally:
        for proc in reversed(procs):
            stop(proc)
        for f in files.values():
            f.close()
        print(f"test_two_deployment_runs_at_once wall time: {time.perf_counter() - started:.0f} s")
