"""A run's training: its parts for the trainer (`prepare_run`), the iterations (`train_run`, which
`Run.train` calls), the folder's history on a fresh start or a resume, the result. It is handed the
`Run` (agent_r1/runs/run.py) and never opens one: `agent-r1 train`'s open-then-train is train.py.

With `ray.enabled`, the same parts are built inside a Ray learner actor and rollouts run on Ray
worker actors (agent_r1/training/ray_trainer.py); the algorithm code is the same. The actors are
handed the run's picklable spec (`Run.spec()`), so `training/` never imports this layer.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.runs.folders import update_record
from agent_r1.training import checkpoint as ckpt
from agent_r1.training.metrics_log import JsonlMetrics

log = logging.getLogger(__name__)

# what a training run writes into train.out_dir; a fresh start moves a previous run's copies aside
RUN_ARTIFACTS = ("metrics.jsonl", "final_metrics.json", "config.json", "init_model", "checkpoints", "ray_shards.jsonl")


@dataclass
class RunParts:
    """What a trainer is built from: the policy to train, its KL reference, the data and index."""

    model: Any
    tokenizer: Any
    reference: Any | None
    latest: Path | None  # the checkpoint to resume from, if any
    index_dir: Path
    train_samples: list[dict[str, Any]]
    eval_samples: list[dict[str, Any]]


def prepare_run(run: Any) -> RunParts:
    """A `Run`'s trainer parts: policy (fresh, `train.init_from`, or the latest checkpoint when the
    run resumes), its KL reference, the data, index and samples (agent_r1/runs/run.py).

    Resuming, a folder with no usable checkpoint is an error (never a silent restart); a fresh start
    moves a previous run's history in the folder aside first (`set_aside_previous_run`; `Run.open`
    did already, a retried flow task may not have). Policy and reference are loaded in `model.dtype`,
    as a fresh start builds them; a resumed full fine-tune then gets back the float32 master weights
    its checkpoint saved."""
    from agent_r1.models.build import load_model, save_model
    from agent_r1.models.lora import apply_lora

    cfg, out = run.cfg, run.folder
    # decided before any data or model work, so a mistyped out_dir fails in a second
    latest = resume_checkpoint(out) if run.resume else None
    if latest is None:
        set_aside_previous_run(out)
    init_dir = out / "init_model"
    lora = cfg.model.lora.enabled  # the reference is then the policy with its adapters off: no copy
    if latest is not None:  # a LoRA checkpoint is an adapter folder: load_model puts it over its base
        model, tokenizer = load_model(latest, cfg.model.dtype)
        if not lora:  # the float32 masters a bf16 full fine-tune saved, not their bf16 rounding
            ckpt.restore_master_weights(model, latest)
        reference = load_model(init_dir, cfg.model.dtype)[0] if cfg.algo.kl_coef > 0 and not lora else None
    else:
        model, tokenizer = run.policy(cfg.train.init_from)
        save_model(model, tokenizer, init_dir)  # the KL reference, and what a resume starts from
        model = apply_lora(model, cfg.model.lora, base=init_dir)  # adapters record init_dir as their base
        reference = None
        run.write_config()
    return RunParts(model, tokenizer, reference, latest, run.index_dir, run.train_samples, run.eval_samples)


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
    from agent_r1.runs.config_file import SECRETS_FILE

    # the config's secrets go with its config.json: the moved run is resumable (runs/config_file.py)
    moved = [name for name in (*RUN_ARTIFACTS, SECRETS_FILE) if (out / name).exists()]
    for name in moved:
        os.replace(out / name, dest / name)
    ckpt.fsync_path(dest)
    ckpt.fsync_path(out)
    log.warning("train.out_dir=%s already held a run (%s); starting over without --resume, so it was moved to %s "
                "(pass --resume to continue a run instead)", out, ", ".join(moved), dest)
    return dest


def train_run(run: Any, sink: Any = None, on_iteration: Any = None) -> dict[str, Any]:
    """`Run.train`: data, index, lineage and the card, then the iterations in-process or on Ray.
    Keeps the folder's `run.json` card current; holds the folder's run lock throughout (run_lock.py)."""
    from agent_r1.runs.lifecycle import fail_card, start_card
    from agent_r1.runs.run_lock import hold_run_folder

    out = run.folder
    with hold_run_folder(out):  # refused before the card is touched: it is the live run's
        try:
            start_card(run.cfg, run.lineage(),
                       resumed_from=ckpt.latest_checkpoint(out / "checkpoints") if run.resume else None)

            def progress(it: int, metrics: dict[str, float]) -> None:
                update_record(out, iterations=it)
                if on_iteration is not None:
                    on_iteration(it, metrics)

            go = _run_ray if run.cfg.ray.enabled else _run_local
            return go(run, sink=sink, on_iteration=progress)
        except BaseException as err:
            fail_card(out, err)
            raise


def check_resume(cfg: ExperimentConfig, resume: bool) -> None:
    if resume and not cfg.train.out_dir:
        raise ValueError("--resume needs a run to continue: `agent-r1 train --resume NAME` (`agent-r1 runs` lists "
                         "them) or train.out_dir=FOLDER")


def _run_local(run: Any, sink: Any = None, on_iteration: Any = None) -> dict[str, Any]:
    from agent_r1.runs.assembly import set_threads
    from agent_r1.training.trainer import RLTrainer

    cfg = run.cfg
    set_threads(cfg.train.threads)
    parts = run.parts()
    metrics_sink = sink or default_sink(cfg, parts.latest)
    trainer = RLTrainer(cfg, parts.model, parts.tokenizer, run.env_factory, parts.train_samples,
                        parts.eval_samples, sink=metrics_sink, reference=parts.reference)
    if parts.latest is not None:
        trainer.load(parts.latest)
        print(f"resumed from {parts.latest} at iteration {trainer.iteration}")
    try:
        final = trainer.fit(on_iteration=on_iteration)
    finally:
        trainer.close()  # a vLLM engine's core process ends with the run, not with the interpreter
        run.close()
    return finish_run(run.folder, trainer.iteration, final)


def default_sink(cfg: ExperimentConfig, latest: Path | None) -> JsonlMetrics:
    """metrics.jsonl in the run folder; on resume, steps after the checkpoint are dropped."""
    return JsonlMetrics(Path(cfg.train.out_dir) / "metrics.jsonl",
                        resume_from_step=(ckpt.checkpoint_iteration(latest) + 1) if latest else None)


def finish_run(out: Path, iterations: int, final: dict[str, float]) -> dict[str, Any]:
    """final_metrics.json, and the card: finished, final held-out EM, the last checkpoint and its hash."""
    from agent_r1.runs.lifecycle import finish_card

    if final:
        (out / "final_metrics.json").write_text(json.dumps(final, indent=1))
    checkpoint = ckpt.latest_checkpoint(out / "checkpoints")
    card = finish_card(out, iterations, final, checkpoint)
    return {"iterations": iterations, "final": final, "out_dir": str(out),
            "checkpoint": str(checkpoint) if checkpoint else None, "checkpoint_sha256": card.get("checkpoint_sha256")}


def _run_ray(run: Any, sink: Any = None, on_iteration: Any = None) -> dict[str, Any]:
    """The same run on Ray actors: they rebuild its parts from `run.spec()` (picklable)."""
    from agent_r1.training.ray_trainer import RayTrainer

    out = run.folder
    with RayTrainer(run.spec()) as trainer:
        if trainer.resumed_from:
            print(f"resumed from {trainer.resumed_from} at iteration {trainer.iteration}")
        trainer.sink = sink or JsonlMetrics(out / "metrics.jsonl",
                                            resume_from_step=trainer.iteration + 1 if trainer.resumed_from else None)
        final = trainer.fit(on_iteration=on_iteration)
        iterations = trainer.iteration
    return finish_run(out, iterations, final)
