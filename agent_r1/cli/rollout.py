"""`agent-r1 rollout`: roll out a model against the search tool and show the trajectories."""

from __future__ import annotations

import argparse
import json
import sys

from agent_r1.cli import add_config_args, run_config
from agent_r1.schema import limited


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollout", help="run multi-turn rollouts and print them (action / observation spans)")
    add_config_args(p)
    p.add_argument("--model", default="", help="model folder or hub id (default: build a fresh small model)")
    p.add_argument("-n", type=limited("train", "eval_size"), default=4, help="number of questions")
    p.add_argument("--samples", type=limited("rollout", "n_samples"), default=1, help="trajectories per question")
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--json", action="store_true", help="print one JSON record per trajectory")
    p.set_defaults(func=cmd_rollout)


def cmd_rollout(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engine import TransformersEngine
    from agent_r1.rollout.loop import run_rollout
    from agent_r1.rollout.render import render_trajectory
    from agent_r1.runs.run import Run

    with Run(run_config(args)) as run:
        model, tokenizer = run.policy(args.model)
        trajs = run_rollout(TransformersEngine(model, tokenizer), ChatCodec(tokenizer), run.env_factory,
                            run.samples("eval", args.n), replace(run.cfg.rollout, n_samples=args.samples),
                            run.cfg.reward, seed=run.cfg.seed, greedy=args.greedy)
    style = "ansi" if sys.stdout.isatty() else "plain"
    for traj in trajs:
        print(json.dumps(traj.to_dict(tokenizer)) if args.json else render_trajectory(traj, tokenizer, style) + "\n")
    return 0
