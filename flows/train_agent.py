"""The `train-agent` Prefect flow: prepare_data -> build_index -> sft -> train -> evaluate.

The flow reads the same `params.yaml` as `dvc repro` and the CLI, plus dotted overrides
(`{"algo.adv_estimator": "rloo", "train.iterations": 10}`), and opens the run once (`Run.open`,
agent_r1/runs/run.py: its folder, config.json, the frozen config). Each task is handed that Run (a
task run on its own may be handed the run folder instead: `run_of`), so every task and a retried one
works on the run's one config and the parts it already built.

Run it:
    python -m flows.train_agent                       # params.yaml, a local (ephemeral) Prefect API
    python -m flows.train_agent --set train.iterations=5
    python -m flows.serve                             # serve deployment `train-agent/local`, then:
    prefect deployment run train-agent/local -p overrides='{"train.iterations": 5}' --watch

MLflow: one parent run per flow run (the run's `mlflow_run`: params, tags, final metrics, the
evaluation table) and one child run per heavy stage (`sft`, `train`, `evaluate`) holding that stage's
step metrics and artifacts; data and index results are tags on the parent (tiny, usually cached).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from flows.steps import (
    ROOT, _config, check_flow_parameters, data_key, dvc_repro, embed_key, index_key, overrides_tag,
    program_environment, run_of, use_dvc)

if __name__ == "__main__":  # run as a program: Prefect reads its settings once, when it is imported below
    program_environment()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.artifacts import create_progress_artifact, update_progress_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from agent_r1.runs.run import Run  # noqa: E402


# --- tasks ----------------------------------------------------------------------------------------
@task(name="prepare_data", retries=2, retry_delay_seconds=5, cache_key_fn=data_key)
def prepare_data(run: Run | str, dvc: bool) -> str:
    """The data folder (synthetic world, or a prepared dataset). Idempotent, so retried and cached."""
    logger = get_run_logger()
    if dvc:
        logger.info("dvc repro prepare\n%s", dvc_repro("prepare"))
    path = run_of(run).data_dir
    logger.info("data ready in %s", path)
    return str(path)


@task(name="embed", retries=1, retry_delay_seconds=5, cache_key_fn=embed_key)
def embed(run: Run | str, data_dir: str) -> str | None:
    """Corpus embeddings for a dense or hybrid search backend (cached by content; skipped otherwise)."""
    from agent_r1.retrieval.embeddings import embed_for_search

    cfg = run_of(run).cfg
    path = embed_for_search(cfg.search, data_dir)
    get_run_logger().info("corpus embedded with %s: %s", cfg.search.encoder, path)
    return str(path) if path else None


@task(name="build_index", retries=2, retry_delay_seconds=5, cache_key_fn=index_key)
def build_index(run: Run | str, data_dir: str, dvc: bool) -> dict[str, Any]:
    """The retrieval index over the corpus; rebuilt only when the corpus or search config changed."""
    logger = get_run_logger()
    run = run_of(run)
    cfg = run.cfg
    if dvc:
        for stage in ("embed", "index"):  # embed: the corpus vectors the index stage depends on (none for BM25)
            logger.info("dvc repro %s\n%s", stage, dvc_repro(stage))
    index_dir = run.index_dir
    manifest = index_dir / "retriever.json"
    info = json.loads(manifest.read_text()) if manifest.exists() else {}
    logger.info("index ready in %s (%s documents, %s)", index_dir, info.get("num_docs", "?"), cfg.search.backend)
    return {"index_dir": str(index_dir), "num_docs": info.get("num_docs"), "corpus_sha1": info.get("corpus_sha1"),
            "backend": cfg.search.backend}


@task(name="sft", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def sft(run: Run, tracker: Any) -> dict[str, Any]:
    """The supervised warm start: reused when one made from the same data, index, model, SFT and env
    settings exists (runs/warm_starts/<hash>), else trained once (deterministic: a retry redoes it).
    Returns it, and the run starting from it (`Run.with_start`: its config.json names the warm start's model)."""
    from agent_r1.runs.warm_start import ensure_warm_start
    from agent_r1.tracking.metrics import read_metrics

    logger = get_run_logger()
    started = time.perf_counter()
    warm = ensure_warm_start(run.cfg, log=logger.info)
    for row in read_metrics(warm.dir / "metrics.jsonl"):  # the warm start's curve, on every run using it
        step = int(row.pop("step"))
        tracker.log_metrics(row, step)
    tracker.log_metrics({"sft/duration_s": time.perf_counter() - started})
    tracker.set_tags({"model_dir": str(warm.model_dir), "warm_start.hash": warm.hash,
                      "warm_start.reused": str(warm.reused).lower()})
    logger.info("warm start %s %s in %.0f s: %s", warm.hash[:16], "reused" if warm.reused else "trained",
                time.perf_counter() - started, warm.model_dir)
    return {"dir": str(warm.dir), "model_dir": str(warm.model_dir), "hash": warm.hash, "reused": warm.reused,
            "run": run.with_start(warm.model_dir, warm.dir)}


@task(name="train", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE)
def train(run: Run, tracker: Any) -> dict[str, Any]:
    """The RL iterations (in-process or through Ray, as `ray.enabled` says), logged to the stage's
    MLflow run. A retry resumes from the latest complete checkpoint, which restores the exact state,
    so retrying is safe."""
    from prefect.runtime import task_run

    from agent_r1.runs.folders import read_record
    from agent_r1.training import checkpoint as ckpt

    logger = get_run_logger()
    if (task_run.run_count or 1) > 1 and ckpt.latest_checkpoint(run.folder / "checkpoints") is not None:
        run = run.resumed()
        logger.warning("retry: resuming from %s", run.resume_from)
    resume_step = ckpt.checkpoint_iteration(run.resume_from) + 1 if run.resume_from else None
    total = run.cfg.train.iterations
    progress = create_progress_artifact(progress=0.0, description=f"RL iterations ({total})")
    started = time.perf_counter()

    def on_iteration(it: int, m: dict[str, float]) -> None:
        keys = ("reward_mean", "em", "search_first_rate", "policy_loss", "eval/em")
        elapsed = time.perf_counter() - started
        logger.info("iter %d/%d %s (%.0f s, ~%.0f s left)", it, total,
                    " ".join(f"{k}={m[k]:.3f}" for k in keys if k in m), elapsed,
                    elapsed / max(it - (resume_step or 1) + 1, 1) * (total - it))
        update_progress_artifact(progress, progress=100.0 * it / max(total, 1))

    result = run.train(tracker=tracker, on_iteration=on_iteration)
    tracker.log_metrics({"train/duration_s": time.perf_counter() - started}, result["iterations"])
    return {"iterations": result["iterations"], "final": result["final"] or {}, "out_dir": result["out_dir"],
            "checkpoint": result["checkpoint"], "checkpoint_sha256": result["checkpoint_sha256"],
            "lineage": read_record(run.folder).get("lineage", {})}


@task(name="evaluate", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def evaluate(run: Run, checkpoint: str, checkpoint_sha256: str, tracker: Any) -> dict[str, Any]:
    """Greedy held-out evaluation of exactly the checkpoint this run's train stage produced (its
    content hash is checked first) and of its starting point, per question set; read-only, so retried."""
    from agent_r1.runs.lineage import checkpoint_hash
    from flows.evaluate import write_curves

    logger = get_run_logger()
    found = checkpoint_hash(checkpoint)
    if found != checkpoint_sha256:
        raise RuntimeError(f"checkpoint {checkpoint} changed since training wrote it (sha256 {found[:16]}, trained "
                           f"{checkpoint_sha256[:16]}): refusing to score another run's weights")
    tracker.set_tags({"checkpoint": checkpoint, "checkpoint.sha256": found})
    results = run.evaluate(checkpoint, log=logger.info)
    write_curves(run)  # the files `dvc plots show` reads
    for name, per in results.items():
        for label, m in per.items():
            tracker.log_metrics({f"{name}/{label}/{k}": v for k, v in m.items()})
    rows = [{"dataset": d, "model": label, **vals} for d, per in results.items() for label, vals in per.items()]
    tracker.log_table(rows, "evaluation.json")
    return results


# --- the flow -------------------------------------------------------------------------------------
def _stage(tracker: Any, name: str, config: dict[str, Any] | None, fn: Any, *args: Any) -> Any:
    """Runs one heavy stage under its own child MLflow run (ended FAILED when the stage raises)."""
    child = tracker.child(name, tags={"stage": name})
    if config is not None:
        child.log_config(config)
    try:
        out = fn(*args, child)
    except BaseException:
        child.end("FAILED")
        raise
    child.end()
    return out


def _wants_sft(cfg: Any) -> bool:
    """SFT runs when init_from is `sft` (the matching warm start) or names `sft.out_dir`'s model."""
    init_from = cfg.train.init_from
    if init_from == "sft":
        return True
    pinned = cfg.sft.out_dir and init_from and Path(init_from).resolve() == (Path(cfg.sft.out_dir) / "model").resolve()
    return bool(cfg.sft.steps > 0 and pinned)


@flow(name="train-agent", log_prints=True)
def train_agent(params: str = "params.yaml", overrides: dict[str, Any] | None = None, dvc: str = "auto",
                experiment: str | None = None) -> dict[str, Any]:
    """Trains a tool-using agent end to end into a run folder of its own, runs/<experiment>/<flow run
    name>. `params`: a params.yaml (relative to the project root); `overrides`: dotted keys, e.g.
    {"train.iterations": 5, "algo.adv_estimator": "rloo"}; `dvc`: auto | on | off (run the data steps
    through `dvc repro`); `experiment`: default train.experiment. Overrides may not name code, commands
    or where credentials go (flows/steps.py SERVING_MACHINE_ONLY): those stay in the params file."""
    check_flow_parameters(params, overrides)  # before anything: parameters come from the API's callers
    from prefect.runtime import flow_run

    from agent_r1.retrieval.base import VECTOR_BACKENDS
    from agent_r1.runs.folders import update_record
    from agent_r1.runs.folders import fail_card
    from agent_r1.tracking import dvc_lock_hashes

    logger = get_run_logger()
    os.chdir(ROOT)  # params and every relative path in them are relative to the project
    overrides = dict(overrides or {})
    if experiment:
        overrides["train.experiment"] = experiment
    cfg = _config(params, overrides)  # fails fast on a bad key, before any work
    via_dvc = use_dvc(params, overrides, dvc)
    # the run, opened once and handed to every task; the warm start is the sft stage's (tracked as a
    # child run), not trained inside the opening
    run = Run.open(cfg, name=flow_run.name or None, resolve_start=False, log=logger.info)
    cfg, experiment = run.cfg, run.cfg.train.experiment
    tags = {"prefect.flow_run_id": str(flow_run.id or ""), "params_file": str(params),
            "overrides": overrides_tag(overrides), "data.via": "dvc" if via_dvc else "library"}
    try:
        with run.mlflow_run("train-agent", tags=tags, root=ROOT,
                            card={"prefect_flow_run_id": str(flow_run.id or "")}) as tracker:
            # never credentials in the log: display_uri
            logger.info("run folder %s; MLflow run %s at %s", run.folder, tracker.run_id, tracker.display_uri)
            data_dir = prepare_data(run, via_dvc)
            if not (Path(data_dir) / cfg.data.train_file).exists():  # cached, but deleted since
                data_dir = prepare_data.with_options(refresh_cache=True)(run, via_dvc)
            if cfg.search.backend in VECTOR_BACKENDS and not via_dvc:  # vectors first (DVC's index stage has its own)
                tracker.set_tags({"embeddings": embed(run, data_dir) or ""})
            index = build_index(run, data_dir, via_dvc)
            if not (Path(index["index_dir"]) / "retriever.json").exists():
                index = build_index.with_options(refresh_cache=True)(run, data_dir, via_dvc)
            data_tags = {"data.dir": data_dir, "index.dir": index["index_dir"], "index.num_docs": index["num_docs"],
                         "index.corpus_sha1": index["corpus_sha1"]}
            if via_dvc:
                data_tags.update(dvc_lock_hashes(ROOT, stages=("prepare", "index")))
            tracker.set_tags(data_tags)

            started = run  # the run as it starts training: from the warm start, when there is one
            if _wants_sft(cfg):
                tree = cfg.to_dict()
                warm = _stage(tracker, "sft", {"seed": tree["seed"], "model": tree["model"], "sft": tree["sft"]},
                              sft, run)
                started = warm["run"]
                tracker.set_tags({"warm_start.hash": warm["hash"], "warm_start.reused": str(warm["reused"]).lower()})
            else:
                logger.info("no SFT stage: train.init_from=%r", cfg.train.init_from)

            trained = _stage(tracker, "train", started.cfg.to_dict(), train, started)
            final = trained["final"]
            tracker.log_metrics({k: v for k, v in final.items() if isinstance(v, (int, float))}, trained["iterations"])
            tracker.set_tags({"checkpoint": trained["checkpoint"] or "",
                              "checkpoint.sha256": trained["checkpoint_sha256"],
                              **{f"lineage.{k}": v for k, v in trained["lineage"].items()}})

            results = _stage(tracker, "evaluate", None, evaluate, started, trained["checkpoint"],
                             trained["checkpoint_sha256"])
            flat = {f"final/{d}/{label}/{k}": v for d, per in results.items() for label, vals in per.items()
                    for k, v in vals.items()}
            tracker.log_metrics(flat, trained["iterations"])
            tracker.log_dict({"train": final, "evaluation": results}, "final_metrics.json")
            dataset = next(iter(results))
            update_record(run.folder, evaluation={d: {label: vals.get("em") for label, vals in per.items()}
                                                  for d, per in results.items()})
    except BaseException as err:
        fail_card(run.folder, err)
        raise
    report = run.tracking_report
    summary = {
        "mlflow_run_id": tracker.run_id, "tracking_uri": tracker.display_uri, "experiment": experiment,
        "run_dir": str(run.folder), "iterations": trained["iterations"], "checkpoint": trained["checkpoint"],
        "checkpoint_sha256": trained["checkpoint_sha256"], "lineage": trained["lineage"],
        "final_em": results[dataset]["rl"]["em"], "start_em": results[dataset].get("start", {}).get("em"),
        "trainer_final_eval_em": final.get("eval/em"),
        "eval_set": dataset, "eval_questions": int(results[dataset]["rl"]["n"]),
        "train_em": final.get("em"), "tracking": report, "ui": tracker.ui_hint(),
    }
    logger.info("done: %s", json.dumps(summary, default=str))
    return summary


def main(argv: list[str] | None = None) -> int:
    import argparse

    from agent_r1.config import parse_overrides

    p = argparse.ArgumentParser(prog="python -m flows.train_agent", description="run the train-agent flow once")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--dvc", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--experiment", default=None, help="default: train.experiment")
    p.add_argument("--summary", default=None, help="also write the summary JSON here")
    args = p.parse_args(argv)
    started = time.perf_counter()
    summary = train_agent(params=args.params, overrides=parse_overrides(args.overrides), dvc=args.dvc,
                          experiment=args.experiment)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=1, default=str))
    start = "" if summary["start_em"] is None else f" (warm start: {summary['start_em']:.1f})"
    tracking = summary["tracking"]
    print("\n" + "=" * 72)
    print(f"train-agent finished in {summary['wall_s'] / 60:.1f} min, {summary['iterations']} RL iterations")
    print(f"final EM on {summary['eval_set']} ({summary['eval_questions']} held-out questions): "
          f"{summary['final_em']:.1f}{start}")
    print(f"MLflow run id: {summary['mlflow_run_id']}  (experiment {summary['experiment']!r}, "
          f"{summary['tracking_uri']})")
    if tracking["pending"]:
        print(f"MLflow was unreachable: {tracking['pending']} record(s) buffered in {tracking['buffer']}; "
              f"`python -m agent_r1.tracking flush` sends them")
    print(f"run folder: {summary['run_dir']}  (`agent-r1 runs` lists runs)")
    print(f"checkpoint: {summary['checkpoint']}  (sha256 {summary['checkpoint_sha256'][:16]})")
    print(f"MLflow UI: {summary['ui']}")
    print("=" * 72)
    return 0


if __name__ == "__main__":
    sys.exit(main())
