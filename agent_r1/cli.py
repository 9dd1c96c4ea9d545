"""`agent-r1` command line: a thin dispatcher over subcommands registered by each package.

Each module in COMMAND_MODULES defines `register(subparsers)`, adding its subcommands with
`set_defaults(func=...)`. Modules are imported lazily only to build the parser; heavy imports
(torch, transformers) happen inside the command functions.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = (
    "agent_r1.data.commands",
    "agent_r1.retrieval.commands",
    "agent_r1.rollout.commands",
    "agent_r1.runs.commands",
    "agent_r1.evaluation.commands",
    "agent_r1.models.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-r1", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # that package has no commands yet
                continue
            raise
        module.register(sub)
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
