"""A full disk mid-run: the run stops with an error that names the folder and says to free space and
resume; the last complete checkpoint stays whole, no half-written save is left taking space, and a
resume continues from that checkpoint.

The disk fills by making the lowest writes of a path fail with ENOSPC: safetensors' file write for a
checkpoint (after writing part of the file, as a real full disk does), the append to metrics.jsonl."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from agent_r1.config import load_config
from agent_r1.runs.run import run_train
from agent_r1.training import checkpoint as ckpt
from agent_r1.tracking.metrics import read_metrics


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("disk_full_world")
    return {"data.dir": str(root / "data"), "search.index_dir": str(root / "index"), "data.n_people": 60,
            "train.runs_dir": str(root / "runs"),
            "model.hidden_size": 32, "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64,
            "model.vocab_size": 300, "train.prompts_per_iter": 2, "rollout.n_samples": 2, "rollout.max_turns": 1,
            "rollout.max_tokens_per_turn": 4, "train.eval_every": 0, "train.eval_size": 0, "train.threads": 1,
            "train.checkpoint_every": 1, "train.keep_checkpoints": 1}


def _cfg(world, out, **over):
    return load_config(None, {**world, "train.out_dir": str(out), **over})


def _full_disk() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device")


def _fill_disk_at_save(monkeypatch, iteration_to_fail: int) -> None:
    """safetensors writes part of the weights file of the checkpoint `iteration_to_fail`, then the disk
    is full; every other save goes through."""
    import transformers.modeling_utils as mu

    real = mu.safe_save_file

    def save_file(tensors, filename, *args, **kwargs):
        if f"iter_{iteration_to_fail:06d}" in str(filename):
            Path(filename).write_bytes(b"\0" * 1000)
            raise _full_disk()
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(mu, "safe_save_file", save_file)


def _assert_clear_stop(err: BaseException, folder: Path, run: Path) -> None:
    text = str(err)
    assert isinstance(err, ckpt.DiskFullError)
    assert f"disk holding {folder}:" in text, text
    assert "free space, then resume with" in text and "--resume" in text and str(run) in text, text
    assert isinstance(err.__cause__, OSError) and err.__cause__.errno == errno.ENOSPC


def test_a_full_disk_during_a_save_stops_the_run_and_resume_continues(world, tmp_path, monkeypatch):
    out = tmp_path / "run"
    _fill_disk_at_save(monkeypatch, iteration_to_fail=2)
    with pytest.raises(ckpt.DiskFullError) as info:
        run_train(_cfg(world, out, **{"train.iterations": 3}))
    checkpoints = out / "checkpoints"
    _assert_clear_stop(info.value, checkpoints, out)
    # the previous checkpoint is whole and is what a resume finds; the half-written save is gone
    assert ckpt.latest_checkpoint(checkpoints) == checkpoints / "iter_000001"
    assert ckpt.check_checkpoint(checkpoints / "iter_000001") == 1
    assert sorted(p.name for p in checkpoints.iterdir()) == ["iter_000001", "latest"]
    monkeypatch.undo()  # space freed
    result = run_train(_cfg(world, out, **{"train.iterations": 3}), resume=True)
    assert result["iterations"] == 3
    assert [m["step"] for m in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]
    assert ckpt.latest_checkpoint(checkpoints).name == "iter_000003"


def test_a_save_that_fails_keeps_the_checkpoint_it_would_replace(tmp_path, monkeypatch, tiny_model):
    """The same iteration saved again (a resume that re-runs it): the copy on disk survives a failed save."""
    model, tok = tiny_model
    root = tmp_path / "checkpoints"
    ckpt.save_checkpoint(root, 4, model, tok, {"note": "first"})
    _fill_disk_at_save(monkeypatch, iteration_to_fail=4)
    with pytest.raises(ckpt.DiskFullError, match="free space, then resume with"):
        ckpt.save_checkpoint(root, 4, model, tok, {"note": "second"})
    assert ckpt.check_checkpoint(root / "iter_000004") == 4
    assert ckpt.load_state(root / "iter_000004")["note"] == "first"
    assert sorted(p.name for p in root.iterdir()) == ["iter_000004", "latest"]


class _TornFile:
    """A file whose writes put part of the text down, then find the disk full."""

    def __init__(self, f):
        self.f = f

    def write(self, text):
        self.f.write(text[: len(text) // 2])
        self.f.flush()
        raise _full_disk()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_a_full_disk_appending_metrics_stops_the_run_with_the_last_checkpoint(world, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real_open, appends = Path.open, []

    def open_(self, mode="r", *args, **kwargs):
        f = real_open(self, mode, *args, **kwargs)
        if self.name == "metrics.jsonl" and mode.startswith("a"):
            appends.append(self)
            if len(appends) == 2:  # step 2's row
                return _TornFile(f)
        return f

    monkeypatch.setattr(Path, "open", open_)
    with pytest.raises(ckpt.DiskFullError) as info:
        run_train(_cfg(world, out, **{"train.iterations": 3}))
    _assert_clear_stop(info.value, out, out)
    assert ckpt.latest_checkpoint(out / "checkpoints") == out / "checkpoints" / "iter_000001"
    monkeypatch.undo()
    assert run_train(_cfg(world, out, **{"train.iterations": 3}), resume=True)["iterations"] == 3
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]  # the torn line was dropped on resume


def test_the_cli_prints_the_stop_and_exits_2_through_mlflow(world, tmp_path, monkeypatch, capsys):
    """`agent-r1 train` (logging to MLflow, its default): one line on stderr, no traceback; the resume
    it names continues the run."""
    from agent_r1.cli import main

    out = tmp_path / "run"
    sets = [a for k, v in {**world, "train.out_dir": str(out), "train.iterations": 2}.items()
            for a in ("--set", f"{k}={v}")]
    _fill_disk_at_save(monkeypatch, iteration_to_fail=2)
    assert main(["train", *sets]) == 2
    err = capsys.readouterr().err
    assert f"agent-r1 train: error: no space left on the disk holding {out / 'checkpoints'}:" in err
    assert f"free space, then resume with `agent-r1 train --resume {out}`" in err
    monkeypatch.undo()
    assert main(["train", "--resume", str(out)]) == 0
    assert ckpt.latest_checkpoint(out / "checkpoints").name == "iter_000002"


def test_a_full_disk_in_a_write_that_names_no_file_names_the_sinks_folders(tmp_path, monkeypatch):
    """An MLflow buffer append whose write fails names no file: the error names the folders the sinks
    write to (the buffer's and metrics.jsonl's), asked of the real sinks (MlflowSink over a RunTracker
    whose MLflow is down, and the run folder's JsonlMetrics)."""
    from agent_r1.tracking.metrics import JsonlMetrics
    from agent_r1.tracking.run import MlflowSink, RunTracker
    from agent_r1.training.trainer import fit_loop

    buffer_root, metrics = tmp_path / "buffer", tmp_path / "run" / "metrics.jsonl"
    metrics.parent.mkdir()
    tracker = RunTracker("r", tracking_uri="http://127.0.0.1:9", buffer_dir=buffer_root, verbose=False)

    def full(*_a, **_k):
        raise _full_disk()

    monkeypatch.setattr(tracker, "log_metrics", full)
    sink = MlflowSink(tracker, also=[JsonlMetrics(metrics)])

    class Backend:
        cfg = load_config(None, {"train.iterations": 2, "train.checkpoint_every": 1, "train.eval_every": 0,
                                 "train.out_dir": str(tmp_path / "run")})
        iteration, eval_samples = 0, []

        def __init__(self):
            self.sink = sink

        def train_step(self):
            self.iteration += 1
            return {"reward_mean": 0.5}

        def _log(self, step, values):
            self.sink.log(step, values)

    with pytest.raises(ckpt.DiskFullError) as info:
        fit_loop(Backend())
    assert f"disk holding {buffer_root} or {metrics.parent}:" in str(info.value)
    assert f"--resume {tmp_path / 'run'}" in str(info.value)
