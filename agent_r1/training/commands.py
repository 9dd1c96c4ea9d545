"""`agent-r1 sft` and `agent-r1 train`."""

from __future__ import annotations

import argparse
import json


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", default=None, help="params.yaml (default: built-in defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set train.lr=1e-4 (repeatable)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare-data", help="write the configured data folder (data.dir) from params")
    _add_config_args(p)
    p.set_defaults(func=cmd_prepare_data)
    p = sub.add_parser("build-index", help="(re)build the configured search index (search.index_dir) from params")
    _add_config_args(p)
    p.set_defaults(func=cmd_build_index)
    p = sub.add_parser("sft", help="supervised warm start on scripted-agent demonstrations")
    _add_config_args(p)
    p.set_defaults(func=cmd_sft)
    p = sub.add_parser("train", help="RL training in-process (PPO, GRPO, REINFORCE++, RLOO)")
    _add_config_args(p)
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in train.out_dir")
    p.set_defaults(func=cmd_train)


def _config(args: argparse.Namespace):
    from agent_r1.config import load_config, parse_overrides

    return load_config(args.params, parse_overrides(args.overrides))


def cmd_sft(args: argparse.Namespace) -> int:
    from agent_r1.training.sft import run_sft

    run_sft(_config(args))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from agent_r1.training.run import run_train

    def progress(it: int, m: dict) -> None:
        keys = ("reward_mean", "em", "search_first_rate", "policy_loss", "eval/em")
        print(f"iter {it:4d} " + " ".join(f"{k}={m[k]:.3f}" for k in keys if k in m), flush=True)

    result = run_train(_config(args), resume=args.resume, on_iteration=progress)
    print(json.dumps(result["final"], indent=1, default=float))
    return 0


def cmd_prepare_data(args: argparse.Namespace) -> int:
    from agent_r1.training.setup import ensure_data

    print(f"data ready in {ensure_data(_config(args))}")
    return 0


def cmd_build_index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agent_r1.training.setup import build_index, index_options

    cfg = _config(args)
    n = build_index(Path(cfg.data.dir) / "corpus.jsonl", cfg.search.index_dir, cfg.search.backend,
                    **index_options(cfg))
    print(f"indexed {n} documents with {cfg.search.backend} into {cfg.search.index_dir}")
    return 0
