"""A run's life on disk: its folder chosen, its warm start resolved, its card kept current.

`open_run` gives a config its own run folder (or keeps a pinned `train.out_dir`); `resolve_init`
turns `train.init_from: sft` into the matching warm start; `start_card` / `finish_card` /
`fail_card` keep `run.json` saying what the run is doing, with its lineage and final checkpoint.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig, load_config
from agent_r1.data.owned import check_replaceable, mark_made
from agent_r1.runs.folders import RUN_FILE, create_run_dir, default_run_name, find_run, read_record, update_record
from agent_r1.runs.lineage import checkpoint_hash, data_hash, digest_cache, index_hash

log = logging.getLogger(__name__)

WARM_START_KEYWORD = "sft"
# what a run folder made before the marker (agent_r1/data/owned.py) holds: its card or its history
RUN_LEGACY = (RUN_FILE, "metrics.jsonl", "checkpoints", "init_model", "final_metrics.json")
PINNED_FIX = ("pin train.out_dir to a new or empty folder, or to a run folder (`agent-r1 runs` lists them), or leave "
              "it empty for a new run folder under train.runs_dir; to start from a model folder, set "
              "train.init_from to it")


def open_run(cfg: ExperimentConfig, name: str | None = None) -> Path:
    """The run's folder, set as `cfg.train.out_dir`: a new `<runs_dir>/<experiment>/<name>` unless
    `train.out_dir` pins one (then that folder, with a card if it has none)."""
    if cfg.train.out_dir:
        folder = check_pinned_run_folder(cfg)
        folder.mkdir(parents=True, exist_ok=True)
        mark_made(folder, "train.out_dir")
        if not (folder / RUN_FILE).is_file():
            update_record(folder, name=folder.name, experiment=cfg.train.experiment, status="created")
        return folder
    folder = create_run_dir(cfg.train.runs_dir, cfg.train.experiment,
                            name or cfg.train.run_name or default_run_name(cfg.algo.adv_estimator))
    cfg.train.out_dir = str(folder)
    return folder


def check_pinned_run_folder(cfg: ExperimentConfig) -> Path:
    """A pinned train.out_dir, refused unless it is new, empty or a run folder: a fresh start moves a
    previous run aside and writes config.json and init_model/ there (a model folder's config.json is
    not ours to overwrite). Called before any SFT, so a wrong folder costs a second, not minutes."""
    folder = Path(cfg.train.out_dir)
    check_replaceable(folder, "train.out_dir", PINNED_FIX, RUN_LEGACY)
    return folder


def resolve_init(cfg: ExperimentConfig, log: Any = print) -> Any:
    """`train.init_from: sft` -> the warm start for this config (reused or trained once), set as
    `cfg.train.init_from`; returns the WarmStart, or None when init_from names a folder or is empty."""
    if cfg.train.init_from != WARM_START_KEYWORD:
        return None
    from agent_r1.runs.warm_start import ensure_warm_start

    warm = ensure_warm_start(cfg, log=log)
    cfg.train.init_from = str(warm.model_dir)
    return warm


def run_lineage(cfg: ExperimentConfig, data_dir: Path, index_dir: Path) -> dict[str, str]:
    """data -> index -> warm start hashes of a run (full SHA-256s)."""
    from agent_r1.runs.warm_start import warm_start_of

    cache = digest_cache(cfg)
    lineage = {"data": data_hash(data_dir, (cfg.data.train_file, cfg.data.eval_file), cache),
               "index": index_hash(index_dir, cfg.search)}
    cache.save()
    warm = warm_start_of(cfg.train.init_from) if cfg.train.init_from else None
    lineage["warm_start"] = warm or (f"model:{cfg.train.init_from}" if cfg.train.init_from else "fresh")
    return lineage


def start_card(cfg: ExperimentConfig, lineage: dict[str, str], resumed_from: Path | None = None) -> dict[str, Any]:
    return update_record(cfg.train.out_dir, status="running", pid=os.getpid(), host=socket.gethostname(),
                         total_iterations=cfg.train.iterations, lineage=lineage,
                         resumed_from=str(resumed_from) if resumed_from else None)


def finish_card(out: Path, iterations: int, final: dict[str, float], checkpoint: Path | None) -> dict[str, Any]:
    fields: dict[str, Any] = {"status": "finished", "iterations": iterations}
    if "eval/em" in final:
        fields["final_eval_em"] = final["eval/em"]
    if "em" in final:
        fields["final_train_em"] = final["em"]
    if checkpoint is not None:
        fields.update(checkpoint=str(Path(checkpoint).resolve()), checkpoint_sha256=checkpoint_hash(checkpoint))
        fields["lineage"] = {"checkpoint": fields["checkpoint_sha256"]}
    return update_record(out, **fields)


def fail_card(out: str | Path, err: BaseException) -> None:
    """Marks the run's card stopped or failed. On a full or broken disk the card may not be writable
    either: that is logged, so the error that stopped the run is the one raised."""
    status = "stopped" if isinstance(err, KeyboardInterrupt) else "failed"
    if (Path(out) / RUN_FILE).is_file():
        try:
            update_record(out, status=status, error=f"{type(err).__name__}: {err}"[:500])
        except OSError as card_err:
            log.warning("could not mark %s %s: %s", Path(out) / RUN_FILE, status, card_err)


def config_for_resume(ref: str, runs_dir: str, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """The config of the run named `ref` (its own `config.json`), with `overrides` on top and
    `train.out_dir` pinned to its folder: what `agent-r1 train --resume NAME` continues."""
    folder = find_run(ref, runs_dir)
    saved = folder / "config.json"
    if not saved.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: it never started training; start it again "
                                "instead of resuming")
    from agent_r1.runs.config_file import read_run_config

    cfg = load_config(None, {**(overrides or {}), "train.out_dir": str(folder)}, tree=read_run_config(folder))
    record = read_record(folder)
    if record.get("status") == "finished" and cfg.train.iterations <= int(record.get("iterations", 0)):
        raise ValueError(f"run {folder.name} already finished its {record.get('iterations')} iterations; raise "
                         f"train.iterations (--set train.iterations=N) to train it further")
    return cfg
