"""The `train-agent` Prefect flow: prepare_data -> build_index -> sft -> train -> evaluate.

Each task is a thin call into `agent_r1`; the flow reads the same `params.yaml` as `dvc repro` and the
CLI, plus dotted overrides (`{"algo.adv_estimator": "rloo", "train.iterations": 10}`).

Run it:
    python -m flows.train_agent                       # params.yaml, a local (ephemeral) Prefect API
    python -m flows.train_agent --set train.iterations=5
    python flows/serve.py                             # serve deployment `train-agent/local`, then:
    prefect deployment run train-agent/local -p overrides='{"train.iterations": 5}' --watch

MLflow: one parent run per flow run (params, tags, final metrics, the evaluation table) and one child
run per heavy stage (`sft`, `train`, `evaluate`) holding that stage's step metrics and artifacts;
data and index results are tags on the parent (they are tiny and usually cached).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a served/worker run loads this file by path
    sys.path.insert(0, str(ROOT))


def _prefect_env() -> None:
    """Prefect's state lives in the project, never phones home, and gets time to start on 2 cores."""
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "1")


_prefect_env()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.artifacts import create_progress_artifact, update_progress_artifact  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

DATA_KEYS = ("seed", "data")
INDEX_KEYS = ("data", "search")


# --- helpers (no Prefect state) -------------------------------------------------------------------
def _config(params: str | None, overrides: dict[str, Any] | None):
    from agent_r1.config import load_config

    return load_config(params or None, dict(overrides or {}))


def _sections(cfg: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    tree = cfg.to_dict()
    return {k: tree[k] for k in keys}


def _use_dvc(params: str | None, overrides: dict[str, Any] | None, mode: str) -> bool:
    """DVC runs the data steps when asked (`dvc="on"`), or in `auto` mode when the flow runs the
    project's own params.yaml in a DVC repo and no override touches seed/data/search (DVC stages
    read params.yaml only, so with such overrides their outputs would not match this run)."""
    if mode == "off":
        return False
    in_repo = (ROOT / ".dvc").is_dir() and (ROOT / "dvc.yaml").exists()
    same_file = params is not None and Path(params).resolve() == (ROOT / "params.yaml").resolve()
    touches = [k for k in (overrides or {}) if k.split(".")[0] in ("seed", "data", "search")]
    if mode == "on":
        if not in_repo or not same_file or touches:
            raise ValueError(f"dvc='on' needs the project's params.yaml in a DVC repo and no seed/data/search "
                             f"override (got params={params!r}, overrides {touches})")
        return True
    return in_repo and same_file and not touches and shutil_which_dvc() is not None


def shutil_which_dvc() -> str | None:
    import shutil

    venv_dvc = Path(sys.executable).parent / "dvc"
    return str(venv_dvc) if venv_dvc.exists() else shutil.which("dvc")


def _dvc_repro(stage: str) -> str:
    cmd = [shutil_which_dvc() or "dvc", "repro", "--single-item", stage]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


def _digest(*items: Any) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _abs(path: str) -> str:
    return str(Path(path).resolve())


def _data_key(context: Any, inputs: dict[str, Any]) -> str:
    """Same seed + data config + folder -> same data: a re-run reuses the result. (The flow refreshes
    the cache if the folder was deleted since.)"""
    cfg = _config(inputs["params"], inputs["overrides"])
    return "prepare-data-" + _digest(_sections(cfg, DATA_KEYS), _abs(cfg.data.dir), inputs.get("dvc"))


def _index_key(context: Any, inputs: dict[str, Any]) -> str | None:
    """Same corpus bytes + search config + folder -> same index."""
    cfg = _config(inputs["params"], inputs["overrides"])
    corpus = Path(inputs["data_dir"]) / "corpus.jsonl"
    if not corpus.exists():
        return None  # no caching
    sha = hashlib.sha1(corpus.read_bytes()).hexdigest()
    return "build-index-" + _digest(_sections(cfg, INDEX_KEYS), _abs(cfg.search.index_dir), sha, inputs.get("dvc"))


# --- tasks ----------------------------------------------------------------------------------------
@task(name="prepare_data", retries=2, retry_delay_seconds=5, cache_key_fn=_data_key)
def prepare_data(params: str | None, overrides: dict[str, Any], dvc: bool) -> str:
    """The data folder (synthetic world, or a prepared dataset). Idempotent, so retried and cached."""
    from agent_r1.training.setup import ensure_data

    logger = get_run_logger()
    cfg = _config(params, overrides)
    if dvc:
        logger.info("dvc repro prepare\n%s", _dvc_repro("prepare"))
    path = ensure_data(cfg)
    logger.info("data ready in %s", path)
    return str(path)


@task(name="build_index", retries=2, retry_delay_seconds=5, cache_key_fn=_index_key)
def build_index(params: str | None, overrides: dict[str, Any], data_dir: str, dvc: bool) -> dict[str, Any]:
    """The retrieval index over the corpus; rebuilt only when the corpus or search config changed."""
    from agent_r1.training.setup import ensure_data, ensure_index

    logger = get_run_logger()
    cfg = _config(params, overrides)
    if dvc:
        logger.info("dvc repro index\n%s", _dvc_repro("index"))
    index_dir = ensure_index(cfg, ensure_data(cfg))
    manifest = index_dir / "retriever.json"
    info = json.loads(manifest.read_text()) if manifest.exists() else {}
    logger.info("index ready in %s (%s documents, %s)", index_dir, info.get("num_docs", "?"), cfg.search.backend)
    return {"index_dir": str(index_dir), "num_docs": info.get("num_docs"), "corpus_sha1": info.get("corpus_sha1"),
            "backend": cfg.search.backend}


@task(name="sft", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def sft(params: str | None, overrides: dict[str, Any], tracker: Any) -> str:
    """Supervised warm start on scripted demonstrations (deterministic: a retry redoes it)."""
    from agent_r1.training.metrics_log import read_metrics
    from agent_r1.training.sft import run_sft

    cfg = _config(params, overrides)
    started = time.perf_counter()
    model_dir = run_sft(cfg)
    for row in read_metrics(Path(cfg.sft.out_dir) / "metrics.jsonl"):
        step = int(row.pop("step"))
        tracker.log_metrics(row, step)
    tracker.log_metrics({"sft/duration_s": time.perf_counter() - started})
    tracker.set_tags({"model_dir": str(model_dir)})
    get_run_logger().info("SFT done in %.0f s: %s", time.perf_counter() - started, model_dir)
    return str(model_dir)


@task(name="train", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE)
def train(params: str | None, overrides: dict[str, Any], tracker: Any) -> dict[str, Any]:
    """The RL iterations (in-process or through Ray, as `ray.enabled` says). A retry resumes from the
    latest complete checkpoint, which restores the exact state, so retrying is safe."""
    from prefect.runtime import task_run

    from agent_r1.tracking import MlflowSink
    from agent_r1.training import checkpoint as ckpt
    from agent_r1.training.metrics_log import JsonlMetrics
    from agent_r1.training.run import run_train, set_aside_previous_run

    logger = get_run_logger()
    cfg = _config(params, overrides)
    out = Path(cfg.train.out_dir)
    latest = ckpt.latest_checkpoint(out / "checkpoints")
    resume = (task_run.run_count or 1) > 1 and latest is not None
    resume_step = ckpt.checkpoint_iteration(latest) + 1 if resume else None
    if not resume:
        # before JsonlMetrics: it would rename an old metrics.jsonl beside itself, and run_train would
        # then move only the old checkpoints; done here, the old run's files move aside together
        set_aside_previous_run(out)
    jsonl = JsonlMetrics(out / "metrics.jsonl", resume_from_step=resume_step)  # what `dvc plots` reads
    sink = MlflowSink(tracker, also=[jsonl], checkpoints_dir=out / "checkpoints")
    total = cfg.train.iterations
    progress = create_progress_artifact(progress=0.0, description=f"RL iterations ({total})")
    started = time.perf_counter()

    def on_iteration(it: int, m: dict[str, float]) -> None:
        keys = ("reward_mean", "em", "search_first_rate", "policy_loss", "eval/em")
        elapsed = time.perf_counter() - started
        logger.info("iter %d/%d %s (%.0f s, ~%.0f s left)", it, total,
                    " ".join(f"{k}={m[k]:.3f}" for k in keys if k in m), elapsed,
                    elapsed / max(it - (resume_step or 1) + 1, 1) * (total - it))
        update_progress_artifact(progress, progress=100.0 * it / max(total, 1))
        sink.log_checkpoints()  # checkpoints saved so far (the trainer saves after this callback)

    if resume:
        logger.warning("retry: resuming from %s", latest)
    result = run_train(cfg, resume=resume, sink=sink, on_iteration=on_iteration)
    sink.log_checkpoints()
    tracker.log_metrics({"train/duration_s": time.perf_counter() - started}, result["iterations"])
    final = result["final"] or {}
    latest = ckpt.latest_checkpoint(out / "checkpoints")
    tracker.set_tags({"checkpoint": str(latest) if latest else ""})
    return {"iterations": result["iterations"], "final": final, "out_dir": result["out_dir"],
            "checkpoint": str(latest) if latest else None}


@task(name="evaluate", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def evaluate(params: str | None, overrides: dict[str, Any], checkpoint: str | None, tracker: Any) -> dict[str, Any]:
    """Greedy held-out evaluation of the trained policy and of its starting point (the SFT warm
    start), per question set; read-only, so retried."""
    from flows.evaluate import evaluate_run, write_curves

    logger = get_run_logger()
    cfg = _config(params, overrides)
    results = evaluate_run(cfg, checkpoint, log=logger.info)
    write_curves(cfg)  # the files `dvc plots show` reads
    for name, per in results.items():
        for label, m in per.items():
            tracker.log_metrics({f"{name}/{label}/{k}": v for k, v in m.items()})
    rows = [{"dataset": d, "model": label, **vals} for d, per in results.items() for label, vals in per.items()]
    tracker.log_table(rows, "evaluation.json")
    return results


# --- the flow -------------------------------------------------------------------------------------
@flow(name="train-agent", log_prints=True)
def train_agent(params: str = "params.yaml", overrides: dict[str, Any] | None = None, dvc: str = "auto",
                experiment: str = "agent-r1") -> dict[str, Any]:
    """Trains a tool-using agent end to end. `params`: a params.yaml (relative to the project root);
    `overrides`: dotted keys, e.g. {"train.iterations": 5, "algo.adv_estimator": "rloo"};
    `dvc`: auto | on | off (run the data steps through `dvc repro`)."""
    from prefect.runtime import flow_run

    from agent_r1.tracking import RunTracker, dvc_lock_hashes, git_tags, machine_tags

    logger = get_run_logger()
    os.chdir(ROOT)  # params and every relative path in them are relative to the project
    overrides = dict(overrides or {})
    cfg = _config(params, overrides)  # fails fast on a bad key, before any work
    use_dvc = _use_dvc(params, overrides, dvc)
    tree = cfg.to_dict()
    tracker = RunTracker(f"train-agent {flow_run.name or ''}".strip(), experiment=experiment,
                         tags={**git_tags(ROOT), **machine_tags(tree), "pipeline": "train-agent",
                               "prefect.flow_run_id": str(flow_run.id or ""), "params_file": str(params),
                               "overrides": json.dumps(overrides), "data.via": "dvc" if use_dvc else "library"})
    tracker.log_config(tree)
    logger.info("MLflow run %s at %s", tracker.run_id, tracker.display_uri)  # never the credentials
    status = "FAILED"
    try:
        data_dir = prepare_data(params, overrides, use_dvc)
        if not (Path(data_dir) / cfg.data.train_file).exists():  # cached, but deleted since
            data_dir = prepare_data.with_options(refresh_cache=True)(params, overrides, use_dvc)
        index = build_index(params, overrides, data_dir, use_dvc)
        if not (Path(index["index_dir"]) / "retriever.json").exists():
            index = build_index.with_options(refresh_cache=True)(params, overrides, data_dir, use_dvc)
        tags = {"data.dir": data_dir, "index.dir": index["index_dir"], "index.num_docs": index["num_docs"],
                "index.corpus_sha1": index["corpus_sha1"]}
        if use_dvc:
            tags.update(dvc_lock_hashes(ROOT, stages=("prepare", "index")))
        tracker.set_tags(tags)

        init_from = cfg.train.init_from
        sft_model = (Path(cfg.sft.out_dir) / "model").resolve()
        if cfg.sft.steps > 0 and init_from and Path(init_from).resolve() == sft_model:
            child = tracker.child("sft", tags={"stage": "sft"})
            child.log_config({"seed": tree["seed"], "model": tree["model"], "sft": tree["sft"]})
            try:
                sft(params, overrides, child)
                child.end()
            except BaseException:
                child.end("FAILED")
                raise
        else:
            logger.info("no SFT stage: train.init_from=%r (SFT writes %s)", init_from, sft_model)

        child = tracker.child("train", tags={"stage": "train"})
        child.log_config(tree)
        try:
            trained = train(params, overrides, child)
            child.end()
        except BaseException:
            child.end("FAILED")
            raise
        final = trained["final"]
        tracker.log_metrics({k: v for k, v in final.items() if isinstance(v, (int, float))}, trained["iterations"])

        child = tracker.child("evaluate", tags={"stage": "evaluate"})
        try:
            results = evaluate(params, overrides, trained["checkpoint"], child)
            child.end()
        except BaseException:
            child.end("FAILED")
            raise
        flat = {f"final/{d}/{label}/{k}": v for d, per in results.items() for label, vals in per.items()
                for k, v in vals.items()}
        tracker.log_metrics(flat, trained["iterations"])
        tracker.log_dict({"train": final, "evaluation": results}, "final_metrics.json")
        status = "FINISHED"
    finally:
        report = tracker.close(status)
    dataset = next(iter(results))
    summary = {
        "mlflow_run_id": tracker.run_id, "tracking_uri": tracker.display_uri, "experiment": experiment,
        "iterations": trained["iterations"], "checkpoint": trained["checkpoint"],
        "final_em": results[dataset]["rl"]["em"], "start_em": results[dataset].get("start", {}).get("em"),
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
    p.add_argument("--experiment", default="agent-r1")
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
    print(f"checkpoint: {summary['checkpoint']}")
    print(f"MLflow UI: {summary['ui']}")
    print("=" * 72)
    return 0


if __name__ == "__main__":
    sys.exit(main())
