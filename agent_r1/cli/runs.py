"""`agent-r1 prepare-data | embed-corpus | build-index | sft | train | runs`: a run assembled from the config."""

from __future__ import annotations

import argparse
import json

from agent_r1.cli import add_config_args, run_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare-data", help="write the configured data folder (data.dir) from params")
    add_config_args(p)
    p.set_defaults(func=cmd_prepare_data)
    p = sub.add_parser("build-index", help="(re)build the configured search index (search.index_dir) from params")
    add_config_args(p)
    p.set_defaults(func=cmd_build_index)
    p = sub.add_parser("embed-corpus", help="encode the corpus for a dense/hybrid search.backend into "
                                            "search.embed_cache_dir (nothing to do for BM25 backends)")
    add_config_args(p)
    p.set_defaults(func=cmd_embed_corpus)
    p = sub.add_parser("sft", help="supervised warm start on scripted-agent demonstrations (reused when one "
                                   "with the same data, model, SFT and env settings exists)")
    add_config_args(p)
    p.set_defaults(func=cmd_sft)
    p = sub.add_parser("train", help="RL training (PPO, GRPO, REINFORCE++, RLOO) into a run folder of its own")
    add_config_args(p)
    p.add_argument("--resume", nargs="?", const=True, default=None, metavar="RUN",
                   help="continue the run named RUN (see `agent-r1 runs`; its own config.json, --set on top) "
                        "from its latest checkpoint; bare --resume continues train.out_dir")
    p.add_argument("--allow-config-change", action="store_true",
                   help="with --resume: continue the run although the config changes what it trains (algorithm, "
                        "seed, data, ...); without it such a resume is refused, naming the keys")
    p.add_argument("--no-mlflow", dest="mlflow", action="store_false",
                   help="do not log to MLflow (metrics still go to the run folder's metrics.jsonl)")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("runs", help="list the run folders: name, status, iterations, final held-out EM, checkpoint")
    add_config_args(p)
    p.add_argument("--experiment", default=None, help="only this experiment")
    p.add_argument("--json", action="store_true", help="the run cards as JSON")
    p.set_defaults(func=cmd_runs)


def cmd_sft(args: argparse.Namespace) -> int:
    from agent_r1.runs.warm_start import ensure_warm_start

    warm = ensure_warm_start(run_config(args))
    print(f"warm start {warm.hash[:16]}: {warm.model_dir} ({'reused' if warm.reused else 'trained'})")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Opens the run (agent_r1/runs/run.py) and trains it, under its MLflow run unless --no-mlflow."""
    from agent_r1.runs.run import Run

    def progress(it: int, m: dict) -> None:
        keys = ("reward_mean", "em", "search_first_rate", "policy_loss", "eval/em")
        print(f"iter {it:4d} " + " ".join(f"{k}={m[k]:.3f}" for k in keys if k in m), flush=True)

    if isinstance(args.resume, str):
        from agent_r1.config import parse_overrides
        from agent_r1.runs.folders import config_for_resume

        cfg = config_for_resume(args.resume, run_config(args).train.runs_dir, parse_overrides(args.overrides))
    else:
        cfg = run_config(args)
    run = Run.open(cfg, bool(args.resume), allow_config_change=args.allow_config_change)
    print(f"run folder: {run.folder}", flush=True)
    if not args.mlflow:
        result = run.train(on_iteration=progress)
    else:
        with run.mlflow_run("agent-r1 train", tags={"stage": "train"}) as tracker:
            result = run.train(tracker=tracker, on_iteration=progress)
        report = run.tracking_report
        print(f"MLflow run {tracker.run_id} (experiment {run.cfg.train.experiment!r}); {tracker.ui_hint()}")
        if report["pending"]:
            print(f"MLflow was unreachable: {report['pending']} record(s) buffered; "
                  "`python -m agent_r1.tracking flush` sends them")
    print(json.dumps(result["final"], indent=1, default=float))
    return 0


def cmd_prepare_data(args: argparse.Namespace) -> int:
    from agent_r1.runs.run import Run

    print(f"data ready in {Run(run_config(args)).data_dir}")
    return 0


def cmd_build_index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agent_r1.retrieval.base import build_index

    cfg = run_config(args)
    n = build_index(Path(cfg.data.dir) / "corpus.jsonl", cfg.search.index_dir, config=cfg.search)
    print(f"indexed {n} documents with {cfg.search.backend} into {cfg.search.index_dir}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from agent_r1.runs.folders import list_runs

    cfg = run_config(args)
    runs = list_runs(cfg.train.runs_dir, args.experiment)
    if args.json:
        print(json.dumps(runs, indent=1, default=str))
        return 0
    if not runs:
        print(f"no runs under {cfg.train.runs_dir}/")
        return 0
    rows = [("experiment/name", "status", "iterations", "held-out EM", "checkpoint")]
    for r in runs:
        em = r.get("final_eval_em")
        iters = f"{r.get('iterations', 0)}/{r.get('total_iterations', '?')}"
        rows.append((f"{r.get('experiment', '?')}/{r.get('name', '?')}", str(r.get("status", "?")), iters,
                     "-" if em is None else f"{em:.1f}", str(r.get("checkpoint") or "-")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0


def cmd_embed_corpus(args: argparse.Namespace) -> int:
    """The pipeline's embed step (DVC stage `embed`): the cache folder always exists afterwards, with
    `embedded.json` saying what was done, so DVC has an output even for a BM25 backend."""
    from pathlib import Path

    from agent_r1.retrieval.embeddings import embed_for_search
    from agent_r1.runs.run import Run

    run = Run(run_config(args))
    cfg = run.cfg
    path = embed_for_search(cfg.search, run.data_dir)
    if cfg.search.embed_cache_dir:
        folder = Path(cfg.search.embed_cache_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "embedded.json").write_text(json.dumps({"backend": cfg.search.backend, "encoder": cfg.search.encoder,
                                                          "vectors": str(path) if path else None}, indent=1))
    print(f"embedded the corpus with {cfg.search.encoder}: {path}" if path
          else f"search.backend={cfg.search.backend} searches without vectors: nothing to embed")
    return 0
