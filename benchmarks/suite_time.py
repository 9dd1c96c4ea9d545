"""How long `make test` takes on a fresh clone, and where the time goes: the target of "at most 8
minutes of tests on 2 cores", measured.

Runs `make test` itself (the Makefile's target, nothing added but PYTEST_ADDOPTS asking every pytest
session it starts for its durations) in a clone that `make install` has installed. Records the
command's wall time (the figure; install excluded, the clone is installed), each pytest session's
own "in N s" (the main suite and, beside it, the vLLM tests), the seconds per test module (where
tests/isolation.py's COST_HINTS come from), and the load averages before and after, which say
whether the cores were idle. Writes benchmarks/results/suite_time.json of this checkout.

    git clone . /tmp/fresh && make -C /tmp/fresh install
    python -m benchmarks.suite_time --clone /tmp/fresh
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import git_commit, loadavg, machine, result_path, write_json

DURATION = re.compile(r"^\s*(\d+\.\d+)s (setup|call|teardown)\s+(\S+)")
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def parse(output: str) -> dict:
    """Seconds per test module (setup + call + teardown of its tests; a group tests/isolation.py
    runs as one unit is the sum of its modules) and each pytest session's summary line."""
    units: dict[str, float] = defaultdict(float)
    for line in output.splitlines():
        m = DURATION.match(line)
        if m:
            units[m[3].split("::", 1)[0]] += float(m[1])
    sessions = []
    for line in output.splitlines():
        # pytest's last line ("=== 3 passed in 1.2s ===", undecorated under -q), never a test's output
        if re.search(r"\d+ (passed|failed).* in \d+\.\d+s", line) and "::" not in line:
            counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
                      for n, kind in SUMMARY.findall(line)}
            seconds = float(re.search(r" in (\d+\.\d+)s", line)[1])
            sessions.append({"seconds": seconds, **counts})
    return {"sessions": sessions, "modules": {m: round(t, 2) for m, t in sorted(units.items(), key=lambda kv: -kv[1])}}


def makefile_workers(clone: Path) -> int | None:
    """The Makefile's `TEST_WORKERS ?= N` (the xdist workers `make test` starts), None without one."""
    m = re.search(r"^TEST_WORKERS\s*\?=\s*(\d+)", (clone / "Makefile").read_text(), re.M)
    return int(m[1]) if m else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clone", type=Path, required=True, help="a fresh clone that `make install` has installed")
    ap.add_argument("--out", type=Path, default=result_path("suite_time"))
    ap.add_argument("--workers", type=int, help="TEST_WORKERS for make (default: the Makefile's)")
    args = ap.parse_args(argv)
    clone = args.clone.resolve()
    if not (clone / ".venv" / ".installed").exists():
        sys.exit(f"{clone} is not installed: run `make -C {clone} install` first")
    load_before = os.getloadavg()
    env = {**os.environ, "PYTEST_ADDOPTS": "--durations=0 --durations-min=0.05"}
    command = ["make", "test", *([f"TEST_WORKERS={args.workers}"] if args.workers else [])]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    output = proc.stdout + proc.stderr
    (args.out.parent / "logs").mkdir(parents=True, exist_ok=True)
    (args.out.parent / "logs" / "suite_time.log").write_text(output)
    parsed = parse(output)
    # wall_s is the figure: make test runs its two pytest sessions at once, so their times overlap
    # make's own order: a command-line variable, then the environment's, then the Makefile's default
    workers = args.workers or int(os.environ.get("TEST_WORKERS") or 0) or makefile_workers(clone)
    result = {"command": " ".join(command), "workers": workers,
              "rc": proc.returncode, "wall_s": round(wall, 1), **parsed,
              "commit": git_commit(clone), "load_before": [round(x, 2) for x in load_before],
              "load_after": loadavg(), "machine": machine()}
    write_json(args.out, result)
    print(json.dumps({k: result[k] for k in ("rc", "wall_s", "sessions")}, indent=1))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
