"""A folder per run: `<runs_dir>/<experiment>/<run name>` (or a pinned `train.out_dir`: `open_run`),
with `run.json` saying what it is, and holding one run only (a fresh start moves a previous run's
files aside: `set_aside_previous_run`).

A run folder is created with an exclusive `mkdir`, so two runs started at the same moment (two
deployment runs, two terminals) can never get the same folder: the second takes the next free
suffix. `run.json` is the run's card, rewritten atomically under a lock as the run goes: name,
experiment, status, iterations, final held-out EM, the checkpoint and its content hash, the MLflow
run, and the lineage (data -> index -> warm start hashes); `start_card` / `finish_card` / `fail_card`
keep it saying what the run is doing. `agent-r1 runs` lists these cards.

Below the folder and its card: its config.json (secrets kept apart), the lock that keeps one
trainer per folder, and what `--resume` checks before anything is built.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_r1.config import RESERVED_FOLDERS, ExperimentConfig, check_folder_name, load_config
from agent_r1.data.owned import check_replaceable, mark_made
from agent_r1.filelock import FileLock
from agent_r1.redaction import REDACTED, redact_config, restore_secrets
from agent_r1.runs.lineage import checkpoint_hash
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
    # the config's secrets go with its config.json: the moved run is resumable (`write_run_config`)
    moved = [name for name in (*RUN_ARTIFACTS, SECRETS_FILE) if (out / name).exists()]
    for name in moved:
        os.replace(out / name, dest / name)
    ckpt.fsync_path(dest)
    ckpt.fsync_path(out)
    log.warning("train.out_dir=%s already held a run (%s); starting over without --resume, so it was moved to %s "
                "(pass --resume to continue a run instead)", out, ", ".join(moved), dest)
    return dest


# ---------------------------------------------------------------- the run's config.json and its secrets
# A run folder's config.json, written without the config's secrets (it is an MLflow artifact and a
# file people share), and the secrets beside it in a file only the run's user can read, so a task, a
# retry or `--resume` that reopens the run from its folder gets the real values back.

CONFIG_FILE = "config.json"
SECRETS_FILE = "config.secrets.json"  # never among RUN_ARTIFACTS: it stays on this machine


def write_run_config(folder: str | Path, tree: dict[str, Any]) -> Path:
    """config.json (secrets hidden) and, when the config holds any, the private secrets file (0600)."""
    folder = Path(folder)
    public, hidden = redact_config(tree)
    secrets = folder / SECRETS_FILE
    if hidden:
        tmp = folder / f".{SECRETS_FILE}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private from the first byte
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)  # an earlier file of the same name kept its mode: set it
            json.dump([[list(path), value] for path, value in hidden], f)
        os.replace(tmp, secrets)
    else:
        secrets.unlink(missing_ok=True)
    path = folder / CONFIG_FILE
    path.write_text(json.dumps(public, indent=2, default=str))
    return path


def read_run_config(folder: str | Path) -> dict[str, Any]:
    """The config tree the folder's config.json holds, with its hidden secrets put back. A value
    edited by hand since (no longer the hidden form) is kept as edited."""
    folder = Path(folder)
    tree = json.loads((folder / CONFIG_FILE).read_text())
    secrets = folder / SECRETS_FILE
    if not secrets.is_file():
        return tree
    found = []
    for path, value in json.loads(secrets.read_text()):
        node = tree
        try:
            for step in path[:-1]:
                node = node[step]
            current = node[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # the entry was removed from config.json by hand
        if isinstance(current, str) and REDACTED in current:
            found.append((tuple(path), value))
    return restore_secrets(tree, found)


# ---------------------------------------------------------------- one trainer per run folder
# One trainer per run folder: an exclusive `flock` on `<run>/.run.lock`, held while the run trains.
#
# Two trainers in one folder (a second `--resume` of a live run) delete each other's temporary
# checkpoint folders and write over each other's metrics: 19 of 20 saves failed. The lock is taken
# without waiting, so the second is refused at once, naming the holder. A killed trainer's lock goes
# with its process (the OS drops an flock when its file closes), so nothing stale is left to clear.

LOCK_FILE = ".run.lock"


class RunInUseError(RuntimeError):
    """Another trainer holds the run folder."""


@contextmanager
def hold_run_folder(folder: str | Path) -> Iterator[None]:
    """Holds the folder's run lock for the `with` block; RunInUseError when another holder has it
    (another process, or another holder in this one)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise RunInUseError(
            f"run folder {folder} is in use by another trainer ({holder}): two trainers in one folder delete each "
            "other's checkpoints. Wait for it to finish or stop it; to train a copy, start a new run instead "
            "of resuming this one") from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode(), 0)
        yield
    finally:
        os.close(fd)  # drops the lock


def check_run_folder_free(folder: str | Path) -> None:
    """Refuses (RunInUseError) a folder another trainer holds now; creates nothing in a new folder."""
    if Path(folder).is_dir():
        with hold_run_folder(folder):
            pass


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"


# ---------------------------------------------------------------- what --resume checks
# What `--resume` checks, in one place: that it names a run (`check_resume`; `config_for_resume` for a
# run named by `agent-r1 train --resume NAME`), that the config does not change what that run trains
# (`check_resume_config`), and which checkpoint it continues from (`resume_checkpoint`). `Run.open`
# runs them before any data, warm start or Ray is built.
#
# A config that differs from the folder's own config.json in what the run trains (algorithm, seed,
# data, format, model, rewards, sampling) is refused unless asked for; a bare `--resume` under another
# params file would otherwise train a different run on top of this one's checkpoint, silently.

#: Keys (or sections) a resume may change: how long, where, how fast or how watched the run goes.
#: Anything else changes what it trains. init_from and sft: a resume starts from its checkpoint.
RESUME_MAY_CHANGE = (
    "train.iterations", "train.eval_every", "train.eval_size", "train.log_trajectories_every",
    "train.checkpoint_every", "train.keep_checkpoints", "train.threads", "train.max_bad_updates", "train.device",
    "train.micro_batch_size", "train.logit_chunk", "train.out_dir", "train.runs_dir", "train.run_name",
    "train.experiment", "train.init_from", "sft", "ray", "data.dir", "search.index_dir", "search.embed_cache_dir",
    "search.url", "search.credentials_url", "search.timeout_s", "search.retry_attempts", "search.retry_backoff_s",
    "search.es_pool_size", "search.msearch_batch_size", "search.bulk_chunk_size", "search.encode_batch_size",
    "env.mcp_servers", "env.agent_concurrency", "env.agent_timeout_s", "rollout.engine", "rollout.vllm",
)


def check_resume(cfg: ExperimentConfig, resume: bool) -> None:
    """A resume names the run it continues (ValueError otherwise)."""
    if resume and not cfg.train.out_dir:
        raise ValueError("--resume needs a run to continue: `agent-r1 train --resume NAME` (`agent-r1 runs` lists "
                         "them) or train.out_dir=FOLDER")


def config_for_resume(ref: str, runs_dir: str, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """The config of the run named `ref` (its own `config.json`), with `overrides` on top and
    `train.out_dir` pinned to its folder: what `agent-r1 train --resume NAME` continues. A run that
    already finished as many iterations as asked is refused."""

    folder = find_run(ref, runs_dir)
    saved = folder / "config.json"
    if not saved.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: it never started training; start it again "
                                "instead of resuming")
    cfg = load_config(None, {**(overrides or {}), "train.out_dir": str(folder)}, tree=read_run_config(folder))
    record = read_record(folder)
    if record.get("status") == "finished" and cfg.train.iterations <= int(record.get("iterations", 0)):
        raise ValueError(f"run {folder.name} already finished its {record.get('iterations')} iterations; raise "
                         f"train.iterations (--set train.iterations=N) to train it further")
    return cfg


def resume_checkpoint(out: Path) -> Path:
    """The checkpoint `--resume` continues from: the newest intact one (a truncated newer one is
    skipped with a warning). None usable is a NoCheckpointError naming the folder and why."""
    root = out / "checkpoints"
    found = ckpt.latest_checkpoint(root)
    if found is not None:
        return found
    if not out.is_dir():
        why = f"the folder {out} does not exist"
    elif not root.is_dir():
        why = f"{out} holds no checkpoints/ folder"
    elif ckpt.checkpoint_candidates(root):
        why = f"every checkpoint in {root} is truncated or corrupt (see the warnings above)"
    elif any(root.glob("iter_*")):
        why = f"the checkpoints in {root} are incomplete (no {ckpt.STATE_FILE}): the run was stopped while saving"
    else:
        why = f"{root} holds no checkpoint yet"
    raise ckpt.NoCheckpointError(f"--resume: nothing to resume in train.out_dir={out}: {why}. Check train.out_dir, "
                                 "or start over without --resume (the history there is moved aside, not deleted).")


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key != "tool_args":
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _may_change(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in RESUME_MAY_CHANGE)


def changed_keys(saved: ExperimentConfig, now: ExperimentConfig) -> list[tuple[str, Any, Any]]:
    """(key, the run's value, the value now) of every key that changes what the run trains."""
    before, after = _flat(saved.to_dict()), _flat(now.to_dict())
    return [(k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k) and not _may_change(k)]


def check_resume_config(cfg: ExperimentConfig, folder: str | Path, allow_change: bool = False) -> None:
    """Refuses (ValueError) a resume of `folder` whose config changes what its run trains."""
    from agent_r1.redaction import redact_secrets

    if allow_change or not (Path(folder) / CONFIG_FILE).is_file():
        return  # no config.json: resume_checkpoint names what is missing
    changes = changed_keys(load_config(tree=read_run_config(folder)), cfg)
    if not changes:
        return
    shown = ", ".join(f"{k} ({_short(redact_secrets(a, tuple(k.split('.'))))} -> "
                      f"{_short(redact_secrets(b, tuple(k.split('.'))))})" for k, a, b in changes[:8])
    more = f" and {len(changes) - 8} more" if len(changes) > 8 else ""
    raise ValueError(f"--resume: the config differs from the run's own ({Path(folder) / CONFIG_FILE}) in what it "
                     f"trains: {shown}{more}. Resume it by name (`agent-r1 train --resume NAME` uses its own config), "
                     "start a new run, or pass --allow-config-change to continue it with these changes")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
