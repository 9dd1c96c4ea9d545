"""`agent-r1` command line: the project's face. Every command lives in this package, one module per
area (agent_r1/cli/*.py); library packages never import it (tests/project/test_layers.py).

Each module in COMMAND_MODULES defines `register(subparsers)`, adding its subcommands with
`set_defaults(func=...)`. Heavy imports (torch, transformers) happen inside the command functions,
so `agent-r1 --help` stays fast. Commands that work on a run build it once (`agent_r1.runs.run.Run`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = (
    "agent_r1.cli.data",
    "agent_r1.cli.retrieval",
    "agent_r1.cli.rollout",
    "agent_r1.cli.runs",
    "agent_r1.cli.evaluation",
    "agent_r1.cli.models",
)


def add_config_args(p: argparse.ArgumentParser) -> None:
    """`--params` and `--set`: the config of a command that reads one (`run_config`)."""
    p.add_argument("--params", default=None, help="params.yaml (default: built-in defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set train.lr=1e-4 (repeatable)")


def run_config(args: argparse.Namespace):
    from agent_r1.config import load_config, parse_overrides

    return load_config(args.params, parse_overrides(args.overrides))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-r1", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        print(f"agent-r1 {args.command}: error: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
