"""Checkpoints are atomic: a half-written one is never picked up."""

from __future__ import annotations

import torch

from agent_r1.training import checkpoint as ckpt


class _Saveable:
    def __init__(self, tag):
        self.tag = tag

    def save_pretrained(self, path):
        (path / "weights.txt").write_text(self.tag)


def test_latest_skips_incomplete_and_prunes(tmp_path):
    root = tmp_path / "ck"
    for it in (1, 2, 3):
        ckpt.save_checkpoint(root, it, _Saveable(f"w{it}"), _Saveable("tok"), {"x": it}, keep=2)
    assert sorted(p.name for p in root.glob("iter_*")) == ["iter_000002", "iter_000003"]
    assert ckpt.latest_checkpoint(root).name == "iter_000003"
    # a crash mid-write leaves a temp folder and no state.pt: never chosen
    (root / ".tmp_iter_000004_1").mkdir()
    (root / "iter_000005").mkdir()
    assert ckpt.latest_checkpoint(root).name == "iter_000003"
    # a lost pointer file falls back to the newest complete folder
    (root / "latest").unlink()
    assert ckpt.latest_checkpoint(root).name == "iter_000003"
    state = ckpt.load_state(ckpt.latest_checkpoint(root))
    assert state["iteration"] == 3 and state["x"] == 3 and "rng" in state


def test_rng_state_roundtrip():
    s = ckpt.rng_state()
    a = torch.rand(3)
    ckpt.set_rng_state(s)
    assert torch.equal(a, torch.rand(3))


def test_no_checkpoint_returns_none(tmp_path):
    assert ckpt.latest_checkpoint(tmp_path / "missing") is None


def _damage_in_place(file, offset, data=b"\x00" * 16):
    """Overwrites bytes of `file` without changing its size (a bad sector, a partial overwrite)."""
    size = file.stat().st_size
    with file.open("r+b") as f:
        f.seek(offset)
        f.write(data)
    assert file.stat().st_size == size


def test_damage_that_keeps_the_size_falls_back_to_the_intact_checkpoint(tmp_path, tiny_model, caplog):
    """Overwritten safetensors header bytes (or tensor bytes of state.pt) keep every size the
    manifest recorded; integrity is checked by content, so resume falls back."""
    import logging

    model, tok = tiny_model
    root = tmp_path / "ck"
    for it in (1, 2):
        ckpt.save_checkpoint(root, it, model, tok, {"w": torch.full((64,), float(it))}, keep=2)
    weights = root / "iter_000002" / "model.safetensors"
    _damage_in_place(weights, 8)  # the JSON header right after its 8-byte length
    with caplog.at_level(logging.WARNING, logger="agent_r1.training.checkpoint"):
        assert ckpt.latest_checkpoint(root).name == "iter_000001"
    assert "iter_000002" in caplog.text and "sha256" in caplog.text
    # tensor bytes inside state.pt: its zip structure still reads, only the content differs
    state = root / "iter_000001" / "state.pt"
    data = state.read_bytes()
    _damage_in_place(state, data.index(torch.full((64,), 1.0).numpy().tobytes()), b"\x7f" * 16)
    assert ckpt.latest_checkpoint(root) is None
