"""One trainer per run folder for the run's life: a second `--resume` (or a fresh start pinned to the
same folder) while a run trains there is refused, naming the holder, and touches nothing; a trainer
prunes only its own temp checkpoint folders (and those of dead processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_r1.config import load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def holder():
    """Another process holding a folder's run lock until the test ends (stopped by its own pid)."""
    procs = []

    def hold(folder: Path) -> subprocess.Popen:
        code = ("import sys; from agent_r1.runs.folders import hold_run_folder\n"
                f"with hold_run_folder({str(folder)!r}):\n    print('held', flush=True); sys.stdin.read()")
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=60)


def _cfg(tmp_path: Path):
    return load_config(None, {"train.out_dir": str(tmp_path / "run"), "train.runs_dir": str(tmp_path / "runs"),
                              "data.dir": str(tmp_path / "data"), "search.index_dir": str(tmp_path / "index")})


def test_a_second_trainer_in_a_busy_run_folder_is_refused(tmp_path, holder, monkeypatch):
    from agent_r1.runs.folders import read_record
    from agent_r1.runs.run import Run
    from agent_r1.runs.folders import RunInUseError

    cfg = _cfg(tmp_path)
    run = Run.open(cfg, resolve_start=False, log=lambda *a: None)
    (run.folder / "metrics.jsonl").write_text('{"step": 1}\n')  # history a fresh start would move aside
    before = read_record(run.folder)
    proc = holder(run.folder)

    for attempt in (lambda: Run.open(cfg, resume=True, resolve_start=False, log=lambda *a: None),
                    lambda: Run.open(cfg, resolve_start=False, log=lambda *a: None)):
        with pytest.raises(RunInUseError) as info:
            attempt()
        assert str(run.folder) in str(info.value) and f"pid {proc.pid}" in str(info.value)
    monkeypatch.setattr(Run, "parts", lambda *a, **k: pytest.fail("trained in a busy folder"))
    with pytest.raises(RunInUseError):
        Run.load(run.folder, resume=True).train()
    assert (run.folder / "metrics.jsonl").read_text() == '{"step": 1}\n'  # nothing moved aside
    assert not (run.folder / "previous").exists()
    assert read_record(run.folder) == before  # the live run's card is not marked failed


def test_the_lock_is_held_while_training_and_dropped_after(tmp_path, monkeypatch):
    from agent_r1.runs.run import Run, RunParts
    from agent_r1.runs.folders import RunInUseError, hold_run_folder
    from agent_r1.training import trainer

    run = Run.open(_cfg(tmp_path), resolve_start=False, log=lambda *a: None)
    seen = []

    class FakeTrainer:
        iteration = 0

        def __init__(self, *a, **k):
            pass

        def fit(self, on_iteration=None):
            with pytest.raises(RunInUseError):  # a second holder, even in this process, is refused
                with hold_run_folder(run.folder):
                    pass
            seen.append(True)
            return {}

        def close(self):
            pass

    monkeypatch.setattr(Run, "parts", lambda self: RunParts(None, None, None, None, self.index_dir, [], []))
    monkeypatch.setattr(trainer, "RLTrainer", FakeTrainer)
    monkeypatch.setattr(Run, "lineage", lambda self: {})
    run.train()
    assert seen == [True]
    with hold_run_folder(run.folder):  # dropped when training ended
        pass


class _Saves:
    def save_pretrained(self, folder) -> None:
        (Path(folder) / "weights.bin").write_bytes(b"0")


def test_a_save_prunes_only_its_own_temp_folders_and_those_of_dead_processes(tmp_path):
    from agent_r1.training.checkpoint import save_checkpoint

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = os.getppid()  # a process that is alive and not this one
    root = tmp_path / "checkpoints"
    root.mkdir()
    theirs = root / f".tmp_iter_000003_{live}"
    their_stale = root / f".stale_iter_000002_{live}"
    gone = root / f".tmp_iter_000003_{dead.pid}"
    mine = root / f".stale_iter_000001_{os.getpid()}"
    for folder in (theirs, their_stale, gone, mine):
        folder.mkdir()
        (folder / "x").write_text("partial")
    save_checkpoint(root, 1, _Saves(), _Saves(), {"step": 1}, keep=2)
    assert theirs.is_dir() and their_stale.is_dir(), "another live trainer's save in progress was deleted"
    assert not gone.exists() and not mine.exists()
    assert (root / "iter_000001" / "state.pt").is_file()
