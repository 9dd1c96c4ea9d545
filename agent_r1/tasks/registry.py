"""Offline data generators, registered by the name `data.source` gives them.

A generator writes `train.jsonl`, `test.jsonl` (QASample rows) and `corpus.jsonl` into a folder,
deterministically from a seed; `is_current` tells whether a folder already holds its output for
this seed and these settings, so `ensure_data` regenerates only when something changed.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_r1.registry import NoTraits, Registry

BUILTIN_TASK_MODULES = ("agent_r1.tasks.synthetic_qa", "agent_r1.tasks.arithmetic")


@dataclass(frozen=True)
class DataGenerator:
    name: str
    write: Callable[[int, Path, Any], Any]  # (seed, out_dir, data config) -> anything (e.g. counts)
    is_current: Callable[[int, Path, Any], bool]  # (seed, out_dir, data config) -> reuse the folder?


#: `data.source` -> its generator; a source no generator has names a prepared folder instead
DATA_GENERATORS: Registry[DataGenerator, NoTraits] = Registry(
    "data generator", key="data.source", where="agent_r1.tasks.registry.DATA_GENERATORS")


def register_data_generator(name: str, is_current: Callable[[int, Path, Any], bool] | None = None):
    """Decorator on `write(seed, out_dir, data_cfg)`. Without `is_current`, a folder is reused when
    its `task.json` (see `write_task_manifest`) names this generator and seed. Registering a name
    again replaces its generator (a re-run cell, a re-imported module), as it always has."""

    def wrap(write: Callable[[int, Path, Any], Any]) -> Callable[[int, Path, Any], Any]:
        made = DataGenerator(name, write, is_current or _manifest_matches(name))
        DATA_GENERATORS.register(name, made, replace=True)
        return write

    return wrap


def get_data_generator(source: str) -> DataGenerator | None:
    """The generator for `data.source`, or None when the source is a prepared folder instead."""
    if source not in DATA_GENERATORS:
        for module in BUILTIN_TASK_MODULES:
            importlib.import_module(module)
    return DATA_GENERATORS.get(source)


def write_task_manifest(out_dir: Path, source: str, seed: int, settings: dict[str, Any]) -> None:
    (Path(out_dir) / "task.json").write_text(
        json.dumps({"source": source, "seed": seed, "settings": settings}, indent=2) + "\n", encoding="utf-8")


def read_task_manifest(out_dir: Path) -> dict[str, Any] | None:
    path = Path(out_dir) / "task.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _manifest_matches(name: str) -> Callable[[int, Path, Any], bool]:
    def is_current(seed: int, out_dir: Path, data_cfg: Any) -> bool:
        made = read_task_manifest(out_dir)
        return made is not None and made.get("source") == name and made.get("seed") == seed

    return is_current
