"""A training run logged to MLflow, the same way from the CLI (`agent-r1 train`, DVC's train stage)
and from the flow: per-iteration metrics (also to the run folder's metrics.jsonl, which `dvc plots`
reads), trajectory tables and traces, checkpoints, and the run's lineage and checkpoint hash as tags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.runs.folders import read_record, update_record
from agent_r1.training import checkpoint as ckpt
from agent_r1.training.metrics_log import JsonlMetrics


def tracked_sink(cfg: ExperimentConfig, tracker: Any, resume: bool) -> Any:
    """An MlflowSink over `tracker` that also writes the run folder's metrics.jsonl. A fresh start
    sets a previous run's history in a pinned folder aside first (with its checkpoints, together);
    a resume drops the steps logged after its checkpoint, and uploads no checkpoint older than it."""
    from agent_r1.runs.fit import set_aside_previous_run
    from agent_r1.tracking import MlflowSink

    out = Path(cfg.train.out_dir)
    latest = ckpt.latest_checkpoint(out / "checkpoints") if resume else None
    if not resume:
        set_aside_previous_run(out)
    jsonl = JsonlMetrics(out / "metrics.jsonl",
                         resume_from_step=ckpt.checkpoint_iteration(latest) + 1 if latest else None)
    sink = MlflowSink(tracker, also=[jsonl], checkpoints_dir=out / "checkpoints")
    if latest is not None:
        # the earlier run uploaded the checkpoints before the one resumed from; that one goes to this run
        # again (the earlier run may have been killed before uploading it), and so do later ones
        sink.logged_checkpoints.update(p.name for p in (out / "checkpoints").glob("iter_*") if p.name < latest.name)
    return sink


def stamp_result(tracker: Any, result: dict[str, Any]) -> dict[str, str]:
    """The run's card lineage and its final checkpoint (path and hash) as MLflow tags; returns them."""
    card = read_record(result["out_dir"])
    tags = {"checkpoint": result.get("checkpoint") or "", "checkpoint.sha256": result.get("checkpoint_sha256") or "",
            **{f"lineage.{k}": v for k, v in card.get("lineage", {}).items()}}
    tracker.set_tags(tags)
    return tags


def train_with_mlflow(cfg: ExperimentConfig, resume: bool = False, on_iteration: Any = None,
                      allow_config_change: bool = False) -> dict[str, Any]:
    """`agent-r1 train` logged to MLflow (experiment `train.experiment`, run named after the run
    folder). The MLflow run id goes on the run's card; a resumed run is a new MLflow run tagged with
    the one it continues."""
    from agent_r1.runs.run import Run
    from agent_r1.tracking import RunTracker, git_tags, machine_tags

    run = Run.open(cfg, resume, allow_config_change=allow_config_change)
    cfg, folder = run.cfg, run.folder
    before = read_record(folder).get("mlflow_run_id")
    tree = cfg.to_dict()
    tags = {**git_tags(), **machine_tags(tree), "pipeline": "agent-r1 train", "stage": "train",
            "run.name": folder.name, "run.dir": str(folder)}
    if resume and before:
        tags["resumed_from_mlflow_run"] = before
    tracker = RunTracker(folder.name, experiment=cfg.train.experiment, tags=tags)
    tracker.log_config(tree)
    update_record(folder, mlflow_run_id=tracker.run_id)
    status = "FAILED"
    sink = tracked_sink(cfg, tracker, resume)

    def progress(it: int, metrics: dict[str, float]) -> None:
        if on_iteration is not None:
            on_iteration(it, metrics)
        sink.log_checkpoints()  # those saved so far (the trainer saves after this callback)

    try:
        result = run.train(sink=sink, on_iteration=progress)
        sink.log_checkpoints()
        stamp_result(tracker, result)
        status = "FINISHED"
    finally:
        report = tracker.close(status)
        if tracker.run_id:  # None at the start while another process was flushing the buffer
            update_record(folder, mlflow_run_id=tracker.run_id)
    return {**result, "mlflow_run_id": tracker.run_id, "tracking": report, "ui": tracker.ui_hint()}
