"""What `--resume` checks, in one place: that it names a run (`check_resume`; `config_for_resume` for a
run named by `agent-r1 train --resume NAME`), that the config does not change what that run trains
(`check_resume_config`), and which checkpoint it continues from (`resume_checkpoint`). `Run.open`
runs them before any data, warm start or Ray is built.

A config that differs from the folder's own config.json in what the run trains (algorithm, seed,
data, format, model, rewards, sampling) is refused unless asked for; a bare `--resume` under another
params file would otherwise train a different run on top of this one's checkpoint, silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig, load_config
from agent_r1.training import checkpoint as ckpt

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
    from agent_r1.runs.config_file import read_run_config
    from agent_r1.runs.folders import find_run, read_record

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
    from agent_r1.runs.config_file import CONFIG_FILE, read_run_config
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
