"""Serves the deployment `train-agent/local` from this process (a long-running listener).

    infra/prefect/server.sh &            # a local Prefect server on 127.0.0.1:4200
    infra/prefect/serve.sh               # `python -m flows.serve`, with PREFECT_API_URL pointing at it
    prefect deployment run train-agent/local --watch
    prefect deployment run train-agent/local -p overrides='{"train.iterations": 5}' --watch

Run it from the project root (`python -m` makes `flows` importable from there). Each flow run executes
in a subprocess of this one, in the project root, which Prefect puts on the import path when it loads
`flows/train_agent.py` by its path. `--limit N` lets N flow
runs go at once (tests/integration/test_deployment.py runs two): each trains into a run folder of its own
(runs/<experiment>/<flow run name>) under its own MLflow run; a warm start they share is trained once.
"""

from __future__ import annotations

import argparse
import os

from flows.steps import ROOT, SERVED_PARAMS_ENV, program_environment


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m flows.serve", description=__doc__.splitlines()[0])
    p.add_argument("--name", default="local")
    p.add_argument("--params", default="params.yaml", help="default params file of the deployment")
    p.add_argument("--limit", type=int, default=1,
                   help="flow runs at once, each in its own run folder and MLflow run (default 1: on 2 cores, "
                        "runs at once share the CPUs)")
    args = p.parse_args(argv)
    # flow runs (subprocesses of this one) take their settings from this file only: a flow run's
    # `params` naming another file is refused (flows/steps.py check_flow_parameters)
    os.environ[SERVED_PARAMS_ENV] = str((ROOT / args.params).resolve())
    program_environment()
    from flows.train_agent import train_agent  # after the environment: Prefect reads it on import

    train_agent.serve(name=args.name, parameters={"params": args.params}, tags=["agent-r1"], limit=args.limit,
                      description="Train a tool-using agent: data -> index -> SFT -> RL -> evaluation")


if __name__ == "__main__":
    main()
