"""How long `make run` takes on a fresh clone, and where the time goes: README's wall-time figure.

Runs `make run` itself (the Makefile's target, nothing added) in a clone that has been installed
(`make install`) but has run nothing yet: no world, index, warm start or run folder, so every step
does its full work. Times the whole command, splits it by the flow's task-finish log lines
(Prefect prints `Task run '<task>-<id>' - Finished in state ...`; the flow runs its tasks one after
another, so a task's time is from the previous finish to its own), and reads the held-out EM of the
warm start and of the trained policy from the run's folder. Writes benchmarks/results/make_run_wall.json
of this checkout (not of the clone). Load averages before and after say whether the cores were idle.

    git clone . /tmp/fresh && make -C /tmp/fresh install
    python -m benchmarks.make_run_wall --clone /tmp/fresh
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from benchmarks.common import machine, result_path, write_json

FINISHED = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| \w+ +\| Task run '(\w+)-[0-9a-f]+' - Finished in state")
STARTED = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) \| \w+ +\| Flow run '[\w-]+' - Beginning flow run")


def _seconds(stamp: str) -> float:
    t = datetime.strptime(stamp, "%H:%M:%S.%f")
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def phases(log: str) -> dict[str, float]:
    """Seconds per flow task, from the flow's start and each task's finish line."""
    out: dict[str, float] = {}
    last = None
    for line in log.splitlines():
        if last is None and (m := STARTED.match(line)):
            last = _seconds(m.group(1))
        elif last is not None and (m := FINISHED.match(line)):
            now = _seconds(m.group(1))
            out[m.group(2)] = round((now - last) % 86400, 1)  # % : a run across midnight
            last = now
    return out


def fresh(clone: Path) -> None:
    used = [p for p in ("data", "runs", "mlruns", ".prefect") if (clone / p).exists()]
    if used:
        sys.exit(f"{clone} has already run ({', '.join(used)} exist): clone again for a fresh measurement")
    if not (clone / ".venv" / ".installed").exists():
        sys.exit(f"{clone} is not installed: run `make -C {clone} install` first (install is not timed)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone", required=True, help="an installed clone that has not run yet")
    ap.add_argument("--out", default=str(result_path("make_run_wall")))
    args = ap.parse_args(argv)
    clone = Path(args.clone).resolve()
    fresh(clone)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    load_before = os.getloadavg()
    start = time.perf_counter()
    run = subprocess.run(["make", "run"], cwd=clone, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (clone / "make_run.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        sys.exit(f"make run failed (exit {run.returncode}); its output: {clone / 'make_run.log'}")
    (run_dir,) = [p.parent for p in (clone / "runs").glob("*/*/eval_metrics.json")]
    ev = json.loads((run_dir / "eval_metrics.json").read_text())["test"]
    result = {"command": "make run", "commit": commit, "wall_s": round(wall, 1),
              "phases_s": phases(run.stdout + run.stderr), "start_em": ev["start"]["em"], "final_em": ev["rl"]["em"],
              "eval_questions": ev["rl"]["n"], "load_before": load_before, "load_after": os.getloadavg(),
              "machine": machine()}
    write_json(Path(args.out), result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
