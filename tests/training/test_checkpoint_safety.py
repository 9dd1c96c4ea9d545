"""Checkpoints are safe to load (weights_only: a crafted state.pt never runs code), durable (fsync
before and after every rename) and a truncated newest one falls back to the previous intact one."""

from __future__ import annotations

import logging
import os
import pickle
import random

import numpy as np
import pytest
import torch

from agent_r1.training import checkpoint as ckpt
from agent_r1.training.trainer import PromptSampler


class _Saveable:
    def save_pretrained(self, path):
        (path / "weights.txt").write_text("w" * 100)


class _Payload:
    """What an attacker would ship: unpickling it calls exec, which writes a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _trainer_like_state():
    """What RLTrainer.state_dict holds: an AdamW state with real steps, the sampler, counters."""
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: 1.0 / (it + 1))  # a function, as schedule.py's
    sched.step()
    sampler = PromptSampler([{"id": str(i)} for i in range(5)], seed=3)
    sampler.next_batch(3)
    return {"optimizer": opt.state_dict(), "sampler": sampler.state_dict(), "scheduler": sched.state_dict(),
            "bad_updates": 0, "skipped_updates": 2,
            "critic": model.state_dict(), "critic_optimizer": opt.state_dict()}


def test_trainer_state_and_rng_load_with_weights_only(tmp_path):
    state = _trainer_like_state()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    np.random.randn()  # a cached gaussian in numpy's state too
    path = ckpt.save_checkpoint(tmp_path, 1, _Saveable(), _Saveable(), state)
    expected = (random.random(), random.gauss(0, 1), np.random.rand(), np.random.randn(), torch.rand(1))
    raw = torch.load(path / "state.pt", weights_only=True)  # what a careful user would type
    assert raw["sampler"] == {"epoch": 0, "offset": 3} and raw["skipped_updates"] == 2
    assert raw["optimizer"]["state"][0]["exp_avg"].shape == (2, 4) and raw["scheduler"]["last_epoch"] == 1
    ckpt.set_rng_state(ckpt.load_state(path)["rng"])
    again = (random.random(), random.gauss(0, 1), np.random.rand(), np.random.randn(), torch.rand(1))
    assert again[:4] == expected[:4] and torch.equal(again[4], expected[4])


@pytest.mark.parametrize("writer", ["torch_save", "raw_pickle"])
def test_crafted_state_is_refused_naming_the_file_and_never_runs(tmp_path, writer):
    marker = tmp_path / "marker"
    root = tmp_path / "checkpoints"
    ckpt.save_checkpoint(root, 1, _Saveable(), _Saveable(), {"x": 1})
    bad = ckpt.save_checkpoint(root, 2, _Saveable(), _Saveable(), {"x": 2}) / "state.pt"
    evil = {"iteration": 2, "rng": ckpt.rng_state(), "optimizer": _Payload(marker)}
    if writer == "torch_save":
        torch.save(evil, bad)
    else:
        bad.write_bytes(pickle.dumps(evil))
    (bad.parent / "manifest.json").unlink()  # an attacker would not leave a manifest that disagrees
    with pytest.raises(ckpt.UnsafeCheckpointError, match="refusing to load") as info:
        ckpt.latest_checkpoint(root)  # resume refuses: no silent fallback past a planted file
    assert str(bad) in str(info.value)
    with pytest.raises(ckpt.UnsafeCheckpointError) as info:
        ckpt.load_state(bad.parent)  # the trainer's own load
    assert str(bad) in str(info.value)
    assert not marker.exists(), "the payload ran"


def test_state_that_needs_pickle_is_refused_when_saved(tmp_path):
    with pytest.raises(ckpt.UnsafeCheckpointError, match="state.pt"):
        ckpt.save_checkpoint(tmp_path, 1, _Saveable(), _Saveable(), {"sampler": _Payload(tmp_path / "m")})
    assert not (tmp_path / "iter_000001").exists() and not (tmp_path / "m").exists()


def test_truncated_newest_state_falls_back_to_previous_and_says_so(tmp_path, caplog):
    for it in (1, 2):
        ckpt.save_checkpoint(tmp_path, it, _Saveable(), _Saveable(), _trainer_like_state())
    state = tmp_path / "iter_000002" / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])  # a kill while it was copied
    with caplog.at_level(logging.WARNING, logger="agent_r1.training.checkpoint"):
        assert ckpt.latest_checkpoint(tmp_path).name == "iter_000001"
    assert "iter_000002" in caplog.text and "falling back" in caplog.text
    assert ckpt.load_state(tmp_path / "iter_000001")["iteration"] == 1


def test_truncated_state_without_manifest_is_still_caught(tmp_path, caplog):
    for it in (1, 2):
        ckpt.save_checkpoint(tmp_path, it, _Saveable(), _Saveable(), _trainer_like_state())
    (tmp_path / "iter_000002" / "manifest.json").unlink()
    state = tmp_path / "iter_000002" / "state.pt"
    state.write_bytes(state.read_bytes()[:-40])
    assert ckpt.latest_checkpoint(tmp_path).name == "iter_000001"
    with pytest.raises(ckpt.CorruptCheckpointError, match="iter_000002"):
        ckpt.load_state(tmp_path / "iter_000002")


def test_truncated_weights_fall_back_too(tmp_path):
    for it in (1, 2):
        ckpt.save_checkpoint(tmp_path, it, _Saveable(), _Saveable(), {"x": it})
    (tmp_path / "iter_000002" / "weights.txt").write_text("w" * 10)
    assert ckpt.latest_checkpoint(tmp_path).name == "iter_000001"


def test_files_then_folder_are_fsynced_around_each_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    root = tmp_path / "ck"
    final = ckpt.save_checkpoint(root, 3, _Saveable(), _Saveable(), {"x": 3})
    renames = [i for i, e in enumerate(events) if e[0] == "replace"]
    into_place = next(i for i in renames if events[i][1].endswith(f"-> {final}"))
    tmp_dir = events[into_place][1].split(" -> ")[0]
    synced_before = {p for kind, p in events[:into_place] if kind == "fsync"}
    for name in ("state.pt", "weights.txt", "manifest.json"):
        assert f"{tmp_dir}/{name}" in synced_before, (name, events)
    assert tmp_dir in synced_before  # the folder's entries, after its files
    pointer = next(i for i in renames if events[i][1].endswith(f"-> {root / 'latest'}"))
    assert pointer > into_place
    assert ("fsync", str(root)) in events[into_place + 1: pointer]  # the rename of the folder is durable
    pointer_tmp = events[pointer][1].split(" -> ")[0]
    assert ("fsync", pointer_tmp) in events[into_place: pointer]  # the pointer's text, before its rename
    assert ("fsync", str(root)) in events[pointer + 1:]  # and the rename itself
    assert (root / "latest").read_text() == "iter_000003"


def test_saving_the_same_iteration_again_never_leaves_neither(tmp_path):
    ckpt.save_checkpoint(tmp_path, 1, _Saveable(), _Saveable(), {"x": 1})
    ckpt.save_checkpoint(tmp_path, 1, _Saveable(), _Saveable(), {"x": 2})
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path))["x"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter_000001", "latest"]
