"""Resume loses nothing: `--resume` with nothing to resume is an error naming the folder, a fresh
start never deletes a previous history, a truncated newest checkpoint falls back to the previous
one, and a resumed policy and reference come back in `model.dtype`."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from agent_r1.config import load_config
from agent_r1.runs.run import Run
from agent_r1.runs.run import run_train
from agent_r1.training import checkpoint as ckpt
from agent_r1.tracking.metrics import JsonlMetrics, read_metrics


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Data and index, built once for the module (each run gets its own out_dir)."""
    root = tmp_path_factory.mktemp("resume_world")
    return {"data.dir": str(root / "data"), "search.index_dir": str(root / "index"), "data.n_people": 60,
            "train.runs_dir": str(root / "runs"),  # its digest cache too: never the repository's runs/
            "model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64,
            "model.vocab_size": 300, "train.prompts_per_iter": 2, "rollout.n_samples": 2, "rollout.max_turns": 1,
            "rollout.max_tokens_per_turn": 4, "train.eval_every": 0, "train.eval_size": 0, "train.threads": 1,
            "train.checkpoint_every": 1, "algo.kl_coef": 0.01}


def _cfg(world, out, **over):
    return load_config(None, {**world, "train.out_dir": str(out), **over})


def _history(path, n=41):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"step": i, "reward_mean": i / n}) + "\n" for i in range(n))
    path.write_text(text)
    return text


@pytest.mark.parametrize("case", ["missing_folder", "empty_folder", "latest_without_state"])
def test_resume_with_nothing_to_resume_names_the_folder(world, tmp_path, case):
    out = tmp_path / "run_typo"
    if case != "missing_folder":
        out.mkdir()
    if case == "latest_without_state":  # a checkpoint folder whose state.pt never got written
        (out / "checkpoints" / "iter_000040").mkdir(parents=True)
        (out / "checkpoints" / "latest").write_text("iter_000040")
        history = _history(out / "metrics.jsonl")
    with pytest.raises(ckpt.NoCheckpointError, match="--resume") as info:
        run_train(_cfg(world, out, **{"train.iterations": 1}), resume=True)
    assert str(out) in str(info.value)
    assert not (out / "init_model").exists()  # nothing was started over
    if case == "latest_without_state":
        assert "incomplete" in str(info.value)
        assert (out / "metrics.jsonl").read_text() == history


def test_fresh_start_moves_a_previous_run_aside(world, tmp_path, caplog):
    out = tmp_path / "run"
    run_train(_cfg(world, out, **{"train.iterations": 2}))
    before = (out / "metrics.jsonl").read_text()
    assert [m["step"] for m in read_metrics(out / "metrics.jsonl")] == [1, 2]
    with caplog.at_level(logging.WARNING, logger="agent_r1.runs.folders"):
        run_train(_cfg(world, out, **{"train.iterations": 1}))  # no --resume: start over
    assert "moved to" in caplog.text and "--resume" in caplog.text
    (aside,) = (out / "previous").iterdir()
    assert (aside / "metrics.jsonl").read_text() == before  # the old history, whole
    assert ckpt.latest_checkpoint(aside / "checkpoints").name == "iter_000002"
    # the folder now holds the new run only: its pruning and --resume cannot pick the old run's iter 2
    assert [m["step"] for m in read_metrics(out / "metrics.jsonl")] == [1]
    assert sorted(p.name for p in (out / "checkpoints").glob("iter_*")) == ["iter_000001"]
    # and the moved folder is a run that --resume continues
    result = run_train(_cfg(world, aside, **{"train.iterations": 3}), resume=True)
    assert result["iterations"] == 3
    assert [m["step"] for m in read_metrics(aside / "metrics.jsonl")] == [1, 2, 3]


def test_jsonl_metrics_never_deletes_a_history(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    history = _history(path)
    with caplog.at_level(logging.WARNING, logger="agent_r1.tracking.metrics"):
        sink = JsonlMetrics(path)
    sink.log(1, {"x": 1.0})
    (aside,) = tmp_path.glob("metrics.*.jsonl")
    assert aside.read_text() == history and str(aside) in caplog.text
    assert read_metrics(path) == [{"step": 1, "x": 1.0}]


def test_resume_drops_a_torn_last_line_and_later_steps(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _history(path, 5)
    with path.open("a") as f:
        f.write('{"step": 5, "rew')  # killed mid-append
    assert [m["step"] for m in read_metrics(path)] == [0, 1, 2, 3, 4]  # a reader mid-append is not an error
    JsonlMetrics(path, resume_from_step=3)
    assert path.read_text().splitlines() == [json.dumps({"step": i, "reward_mean": i / 5}) for i in range(3)]


def test_truncated_newest_checkpoint_resumes_from_the_previous_one(world, tmp_path, caplog):
    out = tmp_path / "run"
    run_train(_cfg(world, out, **{"train.iterations": 2, "train.keep_checkpoints": 2}))
    state = out / "checkpoints" / "iter_000002" / "state.pt"
    state.write_bytes(state.read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="agent_r1.training.checkpoint"):
        result = run_train(_cfg(world, out, **{"train.iterations": 3}), resume=True)
    assert "iter_000002" in caplog.text and "falling back" in caplog.text
    assert result["iterations"] == 3
    assert [m["step"] for m in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]  # step 2 again, once


def test_crafted_checkpoint_is_refused_on_resume(world, tmp_path):
    class Payload:
        def __reduce__(self):
            return (exec, (f"open({str(tmp_path / 'marker')!r}, 'w').write('pwned')",))

    out = tmp_path / "run"
    run_train(_cfg(world, out, **{"train.iterations": 1}))
    state = out / "checkpoints" / "iter_000001" / "state.pt"
    torch.save({"iteration": 40, "optimizer": Payload()}, state)
    (state.parent / "manifest.json").unlink()
    with pytest.raises(ckpt.UnsafeCheckpointError) as info:
        run_train(_cfg(world, out, **{"train.iterations": 2}), resume=True)
    assert str(state) in str(info.value)
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_resume_loads_policy_and_reference_in_model_dtype(world, tmp_path, dtype):
    cfg = _cfg(world, tmp_path / "run", **{"model.dtype": dtype})
    fresh = Run(cfg).parts()
    assert fresh.model.dtype == getattr(torch, dtype)  # a locally built policy too
    ckpt.save_checkpoint(tmp_path / "run" / "checkpoints", 1, fresh.model, fresh.tokenizer, {})
    resumed = Run(cfg, resume=True).parts()
    assert resumed.latest.name == "iter_000001"
    assert resumed.model.dtype == getattr(torch, dtype)
    assert resumed.reference is not None and resumed.reference.dtype == getattr(torch, dtype)
