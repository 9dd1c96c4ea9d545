"""Atomic checkpoints: written to a temporary folder, then renamed into place.

A folder `iter_000010/` holds the policy (save_pretrained), and `state.pt` with optimiser,
critic, RNG states, the data position and the iteration. `latest` names the newest complete
checkpoint; it is itself replaced atomically, so a kill at any moment leaves a usable one.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(root: str | Path, iteration: int, model: Any, tokenizer: Any, state: dict[str, Any],
                    keep: int = 2) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"iter_{iteration:06d}"
    tmp = root / f".tmp_iter_{iteration:06d}_{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save({**state, "iteration": iteration, "rng": rng_state()}, tmp / "state.pt")
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    pointer_tmp = root / f".latest_{os.getpid()}"
    pointer_tmp.write_text(final.name)
    os.replace(pointer_tmp, root / "latest")
    _prune(root, keep)
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint, or None. Stray temporary folders are ignored."""
    root = Path(root)
    pointer = root / "latest"
    if pointer.exists():
        path = root / pointer.read_text().strip()
        if (path / "state.pt").exists():
            return path
    done = sorted(p for p in root.glob("iter_*") if (p / "state.pt").exists())
    return done[-1] if done else None


def load_state(path: str | Path) -> dict[str, Any]:
    return torch.load(Path(path) / "state.pt", weights_only=False)


def _prune(root: Path, keep: int) -> None:
    for stale in root.glob(".tmp_iter_*"):
        shutil.rmtree(stale, ignore_errors=True)
    done = sorted(p for p in root.glob("iter_*") if (p / "state.pt").exists())
    for old in done[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
