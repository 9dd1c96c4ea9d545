"""A folder per run: `<runs_dir>/<experiment>/<run name>` (or a pinned `train.out_dir`: `open_run`),
with `run.json` saying what it is, and holding one run only (a fresh start moves a previous run's
files aside: `set_aside_previous_run`).

A run folder is created with an exclusive `mkdir`, so two runs started at the same moment (two
deployment runs, two terminals) can never get the same folder: the second takes the next free
suffix. `run.json` is the run's card, rewritten atomically under a lock as the run goes: name,
experiment, status, iterations, final held-out EM, the checkpoint and its content hash, the MLflow
run, and the lineage (data -> index -> warm start hashes); `start_card` / `finish_card` / `fail_card`
keep it saying what the run is doing. `agent-r1 runs` lists these cards.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from agent_r1.config import RESERVED_FOLDERS, ExperimentConfig, check_folder_name
from agent_r1.data.owned import check_replaceable, mark_made
from agent_r1.runs.config_file import SECRETS_FILE
from agent_r1.runs.lineage import checkpoint_hash
from agent_r1.filelock import FileLock
from agent_r1.training import checkpoint as ckpt

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
WARM_STARTS = RESERVED_FOLDERS[0]  # <runs_dir>/warm_starts/<hash>: shared by runs, never a run folder
# what a training run writes into its folder; a fresh start moves a previous run's copies aside
RUN_ARTIFACTS = ("metrics.jsonl", "final_metrics.json", "config.json", "init_model", "checkpoints", "ray_shards.jsonl")
# what a run folder made before the marker (agent_r1/data/owned.py) holds: its card or its history
RUN_LEGACY = (RUN_FILE, "metrics.jsonl", "checkpoints", "init_model", "final_metrics.json")
PINNED_FIX = ("pin train.out_dir to a new or empty folder, or to a run folder (`agent-r1 runs` lists them), or leave "
              "it empty for a new run folder under train.runs_dir; to start from a model folder, set "
              "train.init_from to it")


def default_run_name(algo: str) -> str:
    """`grpo-20261203-071502-3f9a`: sortable by time, the algorithm at a glance, unique per start."""
    return f"{algo}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.urandom(2).hex()}"


def create_run_dir(runs_dir: str | Path, experiment: str, name: str) -> Path:
    """Makes `<runs_dir>/<experiment>/<name>` (or `<name>-2`, `-3`, ... when taken) and returns it."""
    parent = Path(runs_dir) / check_folder_name(experiment, "train.experiment")
    parent.mkdir(parents=True, exist_ok=True)
    check_folder_name(name, "train.run_name")
    for n in range(1, 1000):
        folder = parent / (name if n == 1 else f"{name}-{n}")
        try:
            folder.mkdir()  # exclusive: exactly one creator wins
        except FileExistsError:
            continue
        mark_made(folder, "train.runs_dir")  # made here: a later pinned train.out_dir may reuse it
        write_record(folder, {"name": folder.name, "experiment": experiment, "status": "created",
                              "created": _now(), "host": socket.gethostname(), "pid": os.getpid(),
                              "command": " ".join(sys.argv)[:500]})
        return folder
    raise RuntimeError(f"no free run folder named {name}[-N] under {parent}; pick another train.run_name")


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


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def read_record(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / RUN_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); fix or remove it") from None


def write_record(folder: Path, record: dict[str, Any]) -> None:
    tmp = folder / f".{RUN_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=1, default=str))
    os.replace(tmp, folder / RUN_FILE)  # readers see the old card or the new one, never half of one


def update_record(folder: str | Path, **fields: Any) -> dict[str, Any]:
    """Merges `fields` into the run's card (dicts one level deep, e.g. `lineage`), atomically."""
    folder = Path(folder)
    with FileLock(folder / f".{RUN_FILE}.lock"):
        record = read_record(folder)
        for key, value in fields.items():
            if isinstance(value, dict) and isinstance(record.get(key), dict):
                record[key] = {**record[key], **value}
            else:
                record[key] = value
        record["updated"] = _now()
        write_record(folder, record)
    return record


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


def _alive(record: dict[str, Any]) -> bool:
    if record.get("host") != socket.gethostname():
        return True  # another machine's process: cannot tell from here, trust the card
    try:
        os.kill(int(record.get("pid", 0)), 0)
    except (OSError, ValueError):
        return False
    return True


def shown_status(record: dict[str, Any]) -> str:
    """The card's status, except that a 'running' run whose process is gone is shown as 'stopped'
    (killed: `agent-r1 train --resume NAME` continues it)."""
    status = record.get("status", "?")
    if status in ("running", "created") and not _alive(record):
        return "stopped"
    return status


def list_runs(runs_dir: str | Path, experiment: str | None = None) -> list[dict[str, Any]]:
    """Every run folder's card under `runs_dir` (optionally one experiment), oldest first."""
    runs = []
    for card in sorted(Path(runs_dir).glob(f"{experiment or '*'}/*/{RUN_FILE}")):
        if card.parent.parent.name == WARM_STARTS:
            continue
        try:
            record = read_record(card.parent)
        except ValueError as err:
            record = {"name": card.parent.name, "status": f"unreadable ({err})"}
        runs.append({**record, "dir": str(card.parent), "status": shown_status(record)})
    return sorted(runs, key=lambda r: str(r.get("created", "")))


def find_run(ref: str, runs_dir: str | Path) -> Path:
    """A run folder from a name (searched in every experiment), `experiment/name`, or a path."""
    path = Path(ref)
    if (path / RUN_FILE).is_file() or (path / "checkpoints").is_dir():
        return path
    matches = sorted(p.parent for p in Path(runs_dir).glob(f"*/{ref}/{RUN_FILE}")) if "/" not in ref else \
        [p for p in [Path(runs_dir) / ref] if (p / RUN_FILE).is_file()]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        known = ", ".join(r["name"] for r in list_runs(runs_dir)[-5:]) or "none"
        raise FileNotFoundError(f"no run named {ref!r} under {runs_dir}/ (latest: {known}); "
                                "`agent-r1 runs` lists them, or pass the run folder's path")
    raise ValueError(f"{len(matches)} runs are named {ref!r} ({', '.join(map(str, matches))}); "
                     "pass experiment/name or the folder's path")


def set_aside_previous_run(out: Path) -> Path | None:
    """A fresh start in a folder that holds a previous run's history (metrics or checkpoints) moves
    that run's files to `out/previous/<UTC time>/` and says so. Returns that folder, or None.

    Why not refuse, or overwrite: verl and the HF/TRL example scripts never wipe an output folder's
    checkpoints on a new run, and Lightning gives each new run a new version folder; refusing would
    break every rerun into the same folder (params.yaml's runs/default, the benchmarks' --rerun).
    Writing over the old files would mix two runs: metrics.jsonl would lose its history, pruning
    by name would keep the old run's higher iterations and delete the new ones, and a later
    --resume would continue the wrong run. Moved aside, nothing is lost, the folder holds one run,
    and the moved folder is itself a run folder (`train.out_dir=<it> --resume` continues it)."""
    metrics = out / "metrics.jsonl"
    has_history = (metrics.is_file() and metrics.stat().st_size > 0) or ckpt.checkpoint_candidates(out / "checkpoints")
    if not has_history:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = out / "previous" / stamp
    n = 1
    while dest.exists():  # two fresh starts within one second
        n += 1
        dest = out / "previous" / f"{stamp}_{n}"
    dest.mkdir(parents=True)
    # the config's secrets go with its config.json: the moved run is resumable (runs/config_file.py)
    moved = [name for name in (*RUN_ARTIFACTS, SECRETS_FILE) if (out / name).exists()]
    for name in moved:
        os.replace(out / name, dest / name)
    ckpt.fsync_path(dest)
    ckpt.fsync_path(out)
    log.warning("train.out_dir=%s already held a run (%s); starting over without --resume, so it was moved to %s "
                "(pass --resume to continue a run instead)", out, ", ".join(moved), dest)
    return dest
