"""Runs that never collide: a folder per run with its card, warm starts keyed by what made them,
lineage hashes of content, `agent-r1 runs` and `agent-r1 train --resume NAME`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_r1.config import load_config
from agent_r1.runs.folders import create_run_dir, list_runs, read_record, update_record
from agent_r1.runs.lineage import checkpoint_hash, data_hash, hash_json
from tests import forked
from tests.mlflow_store import fresh_store
from tests.pipeline_helpers import unpinned_micro


def _overrides(tmp_path: Path, **extra) -> dict:
    """The micro experiment with nothing pinned: runs and warm starts land in tmp_path/runs."""
    return unpinned_micro(tmp_path, **{"train.eval_every": 0, **extra})


def _train(tmp_path: Path, **extra):
    from agent_r1.runs.run import run_train

    cfg = load_config(None, _overrides(tmp_path, **extra))
    result = run_train(cfg)
    return cfg, result


def test_two_runs_never_collide_and_share_one_warm_start(tmp_path):
    cfg_a, a = _train(tmp_path)
    ckpt_a = Path(a["checkpoint"])
    before = checkpoint_hash(ckpt_a)
    cfg_b, b = _train(tmp_path, **{"algo.adv_estimator": "rloo"})
    dir_a, dir_b = Path(a["out_dir"]), Path(b["out_dir"])
    assert dir_a != dir_b and dir_a.parent == dir_b.parent == tmp_path / "runs" / "agent-r1"
    assert dir_a.name.startswith("grpo-") and dir_b.name.startswith("rloo-")
    # A's final checkpoint is intact after B, and the card's hash is its content's
    assert checkpoint_hash(ckpt_a) == before == read_record(dir_a)["checkpoint_sha256"]
    for folder, result in ((dir_a, a), (dir_b, b)):
        card = read_record(folder)
        assert card["status"] == "finished" and card["iterations"] == 2 and card["total_iterations"] == 2
        assert Path(card["checkpoint"]).parent == folder.resolve() / "checkpoints"
        assert card["final_eval_em"] == json.loads((folder / "final_metrics.json").read_text())["eval/em"]
        assert result["checkpoint_sha256"] == card["lineage"]["checkpoint"]
    # one warm start, trained by A and reused by B; both runs name it in their lineage
    (warm,) = [p for p in (tmp_path / "runs" / "warm_starts").iterdir() if p.is_dir()]
    card_a, card_b = read_record(dir_a), read_record(dir_b)
    assert card_a["lineage"]["warm_start"] == card_b["lineage"]["warm_start"]
    assert card_a["lineage"]["warm_start"].startswith(warm.name)
    assert card_a["lineage"]["data"] == card_b["lineage"]["data"] and card_a["lineage"]["index"]
    saved = [json.loads((d / "config.json").read_text())["train"] for d in (dir_a, dir_b)]
    assert saved[0]["init_from"] == saved[1]["init_from"] == str(warm / "model")
    # the caller's config is the caller's: the run settled its own copy (Run.open)
    assert cfg_a.train.init_from == cfg_b.train.init_from == "sft" and cfg_a.train.out_dir == ""


def test_warm_start_key_follows_what_makes_it(tmp_path):
    from agent_r1.runs.run import Run
    from agent_r1.runs.warm_start import ingredients

    def key(**extra) -> str:
        cfg = load_config(None, _overrides(tmp_path, **extra))
        run = Run(cfg)
        return hash_json(ingredients(cfg, run.data_dir, run.index_dir))

    base = key()
    assert key() == base
    # RL-only settings share the warm start
    assert key(**{"algo.adv_estimator": "rloo", "train.lr": 1e-5, "train.iterations": 9,
                  "model.lora.r": 4, "train.run_name": "x"}) == base
    # whatever changes the demonstrations or the SFT itself makes a new one
    for changed in ({"sft.steps": 6}, {"sft.lr": 1e-3}, {"model.hidden_size": 64}, {"seed": 1},
                    {"env.format": "hermes"}, {"rollout.max_observation_tokens": 16}, {"search.k": 1},
                    {"model.chat_template": "qwen2.5"}, {"env.format": "hermes", "sft.demo_style": "chat"}):
        assert key(**changed) != base, changed
    # keys added later leave the key of a warm start made before them as it was while at their defaults
    cfg = load_config(None, _overrides(tmp_path))
    made_of = ingredients(cfg, Run(cfg).data_dir, Run(cfg).index_dir)
    assert "chat_template" not in made_of["model"] and "demo_style" not in made_of["sft"]


def test_warm_start_reused_from_the_store_into_a_pinned_folder(tmp_path):
    """DVC pins sft.out_dir; a warm start already in the store is copied there, not trained again."""
    from agent_r1.runs.warm_start import ensure_warm_start, is_warm_start

    cfg = load_config(None, _overrides(tmp_path))
    first = ensure_warm_start(cfg, log=lambda _: None)
    assert not first.reused
    pinned = load_config(None, _overrides(tmp_path, **{"sft.out_dir": str(tmp_path / "dvc" / "sft")}))
    said = []
    second = ensure_warm_start(pinned, log=said.append)
    assert second.reused and second.hash == first.hash and "reused" in said[0]
    assert is_warm_start(tmp_path / "dvc" / "sft", first.hash)
    assert (second.model_dir / "model.safetensors").read_bytes() == (first.model_dir / "model.safetensors").read_bytes()


def _make(args: tuple[str, str]) -> str:
    return str(create_run_dir(args[0], "exp", args[1]))


def test_run_folders_are_exclusive_across_processes(tmp_path):
    with forked.context().Pool(4) as pool:
        made = pool.map(_make, [(str(tmp_path), "same")] * 8)
    assert len(set(made)) == 8
    assert sorted(Path(p).name for p in made) == sorted(["same"] + [f"same-{n}" for n in range(2, 9)])
    assert all(read_record(p)["status"] == "created" for p in made)


def test_bad_names_are_refused_naming_the_key(tmp_path):
    for key, value in (("train.run_name", "../escape"), ("train.experiment", "warm_starts"),
                       ("train.run_name", ".hidden"), ("train.experiment", "a/b")):
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            load_config(None, {key: value})


def test_lineage_hashes_content_not_paths(tmp_path):
    src = tmp_path / "a"
    src.mkdir()
    (src / "train.jsonl").write_text('{"q": 1}\n')
    (src / "corpus.jsonl").write_text('{"d": 1}\n')
    copy = tmp_path / "b"
    shutil.copytree(src, copy)
    assert data_hash(src, ("train.jsonl",)) == data_hash(copy, ("train.jsonl",))
    (copy / "corpus.jsonl").write_text('{"d": 2}\n')
    assert data_hash(src, ("train.jsonl",)) != data_hash(copy, ("train.jsonl",))


def test_runs_cli_lists_runs_and_shows_killed_ones_as_stopped(tmp_path, capsys):
    from agent_r1.cli import main

    runs = tmp_path / "runs"
    done = create_run_dir(runs, "agent-r1", "done")
    update_record(done, status="finished", iterations=4, total_iterations=4, final_eval_em=37.5,
                  checkpoint=str(done / "checkpoints/iter_000004"))
    killed = create_run_dir(runs, "other", "killed")
    update_record(killed, status="running", pid=2 ** 22 + 12345, iterations=1, total_iterations=4)  # no such pid
    assert main(["runs", "--set", f"train.runs_dir={runs}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:5] == ["experiment/name", "status", "iterations", "held-out", "EM"]
    assert any(ln.split()[:4] == ["agent-r1/done", "finished", "4/4", "37.5"] for ln in out)
    assert any(ln.split()[:3] == ["other/killed", "stopped", "1/4"] for ln in out)
    assert main(["runs", "--set", f"train.runs_dir={runs}", "--experiment", "other", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed] == ["killed"] and listed[0]["status"] == "stopped"
    assert [r["name"] for r in list_runs(runs)] == ["done", "killed"]


def test_resume_a_named_run(tmp_path, capsys):
    from agent_r1.cli import main

    params = tmp_path / "params.yaml"
    import yaml

    tree: dict = {}
    for dotted, value in _overrides(tmp_path).items():
        node = tree
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    params.write_text(yaml.safe_dump(tree))
    assert main(["train", "--params", str(params), "--set", "train.run_name=first"]) == 0
    folder = tmp_path / "runs" / "agent-r1" / "first"
    assert read_record(folder)["iterations"] == 2
    capsys.readouterr()
    # a finished run resumes only to train further; an unknown name fails naming what exists
    assert main(["train", "--params", str(params), "--resume", "first"]) == 2
    assert "already finished its 2 iterations" in capsys.readouterr().err
    assert main(["train", "--params", str(params), "--resume", "nope"]) == 2
    said = capsys.readouterr().err
    assert "no run named 'nope'" in said and "first" in said  # the latest runs are named
    assert main(["train", "--params", str(params), "--resume", "first", "--set", "train.iterations=3"]) == 0
    assert "resumed from" in capsys.readouterr().out
    card = read_record(folder)
    assert card["status"] == "finished" and card["iterations"] == 3 and card["checkpoint"].endswith("iter_000003")
    assert [r["name"] for r in list_runs(tmp_path / "runs")] == ["first"]  # no second folder
    steps = [json.loads(ln)["step"] for ln in (folder / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2, 3]


def test_cli_train_is_an_mlflow_run_with_its_lineage(tmp_path, monkeypatch, capsys):
    """`agent-r1 train` (and so DVC's train stage) logs to MLflow: a run named after its folder,
    holding the folder, the lineage and the checkpoint hash that its card holds."""
    from mlflow.tracking import MlflowClient

    from agent_r1.cli import main

    uri = fresh_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("AGENT_R1_MLFLOW_BUFFER", str(tmp_path / "buffer"))
    sets = [f"{k}={v}" for k, v in _overrides(tmp_path, **{"train.experiment": "cli"}).items()
            if not isinstance(v, (list, dict))]
    assert main(["train", *[a for s in sets for a in ("--set", s)]]) == 0
    (folder,) = (tmp_path / "runs" / "cli").iterdir()
    card = read_record(folder)
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(card["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == folder.name
    tags = run.data.tags
    assert tags["run.dir"] == str(folder) and tags["checkpoint.sha256"] == card["checkpoint_sha256"]
    assert {k: tags[f"lineage.{k}"] for k in card["lineage"]} == card["lineage"]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "reward_mean")] == [1, 2]
    assert card["mlflow_run_id"] in capsys.readouterr().out
    # --no-mlflow: the card, no MLflow run
    assert main(["train", "--no-mlflow", *[a for s in sets for a in ("--set", s)]]) == 0
    cards = [read_record(p) for p in (tmp_path / "runs" / "cli").iterdir()]
    assert len(cards) == 2 and sum("mlflow_run_id" in c for c in cards) == 1


def test_card_names_the_mlflow_run_made_later_from_the_buffer(tmp_path, monkeypatch):
    """Another process flushing the MLflow buffer when a run starts (two deployment runs at once):
    the run is created from the buffer later, and the card names it once it exists, not None."""
    from agent_r1.runs.run import Run
    from agent_r1.filelock import FileLock

    monkeypatch.setenv("MLFLOW_TRACKING_URI", fresh_store(tmp_path))
    monkeypatch.setenv("AGENT_R1_MLFLOW_BUFFER", str(tmp_path / "buffer"))
    other = FileLock(tmp_path / "buffer" / ".flush.lock")  # the other process's hold (its own descriptor)
    assert other.acquire(blocking=False)
    seen = {}

    def release(it, metrics):  # the run has started, its card written, while the lock was held
        if other.path.exists() and not seen:
            (folder,) = (tmp_path / "runs" / "late").iterdir()  # the run's own folder (cfg is the caller's)
            seen["card_at_start"] = read_record(folder).get("mlflow_run_id")
            other.release()

    cfg = load_config(None, _overrides(tmp_path, **{"train.experiment": "late", "train.iterations": 1}))
    run = Run.open(cfg)
    with run.mlflow_run("agent-r1 train") as tracker:
        run.train(tracker=tracker, on_iteration=release)
    assert seen == {"card_at_start": None}  # the id was not known at the start
    assert tracker.run_id and read_record(run.folder)["mlflow_run_id"] == tracker.run_id
