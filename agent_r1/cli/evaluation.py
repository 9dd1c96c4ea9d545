"""`agent-r1 eval`: score a model on question sets in agent, naive-RAG or direct mode.

    agent-r1 eval --model runs/sft/model --questions data/synthetic/test.jsonl --index data/index \
        --mode agent,rag,direct --json eval.json -n 100
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent_r1.cli import add_config_args, run_config


def register(sub: argparse._SubParsersAction) -> None:
    from agent_r1.evaluation.modes import EVAL_MODES
    from agent_r1.schema import count

    p = sub.add_parser("eval", help="evaluate a model on question sets (agent | rag | direct), EM/F1/substring EM")
    p.add_argument("--model", required=True, help="model folder, checkpoint folder or hub id")
    p.add_argument("--questions", required=True, metavar="FILE[,FILE...]",
                   help="question files (our questions.jsonl, HotpotQA/2Wiki/MuSiQue/Bamboogle rows); "
                        "NAME=FILE names a dataset")
    p.add_argument("--index", default=None, help="retriever index folder (default: search.index_dir); "
                                                 "needed by agent and rag")
    p.add_argument("--mode", default="agent", help=f"one or more of {sorted(EVAL_MODES)}, comma-separated")
    add_config_args(p)  # rollout budgets, env format, search k, ...
    p.add_argument("-n", "--limit", type=count, default=None, help="first N questions of each file")
    p.add_argument("--sample", action="store_true", help="sample at rollout.temperature instead of greedy")
    p.add_argument("--batch-size", type=count, default=64)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT", help="write the report as JSON")
    p.add_argument("--trajectories", default=None, metavar="OUT.jsonl", help="write every trajectory")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    from agent_r1.evaluation.harness import (
        evaluate_model,
        format_table,
        json_report,
        load_question_set,
        log_to_mlflow,
        parse_question_specs,
        write_trajectories,
    )
    from agent_r1.runs.assembly import set_threads

    cfg = run_config(args)
    set_threads(cfg.train.threads)
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    specs = parse_question_specs(args.questions)
    datasets = {name: load_question_set(path, args.limit) for name, path in specs.items()}
    report = evaluate_model(args.model, cfg, datasets, modes, index_dir=args.index, greedy=not args.sample,
                            batch_size=args.batch_size, device=args.device,
                            keep_trajectories=bool(args.trajectories))
    report["questions"] = {name: str(p) for name, p in specs.items()}
    print(format_table(report))
    print(f"({'greedy' if not args.sample else 'sampled'}; {report['wall_seconds']:.1f}s)")
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(json_report(report), indent=1))
        print(f"wrote {out}")
    if args.trajectories:
        print(f"wrote {write_trajectories(report, args.trajectories)} trajectories to {args.trajectories}")
    if log_to_mlflow(report):
        print("logged to the active MLflow run")
    return 0
