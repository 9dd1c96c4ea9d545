"""SIGKILL a training run at random moments (rollout, update, checkpoint write), resume it, and
count clean resumes. Writes benchmarks/results/kill_resume.json.

    python benchmarks/kill_resume.py --trials 10
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_r1.training.killtest import _train_cmd, kill_and_resume, random_delays  # noqa: E402
from tests.reliability.test_kill_resume import micro_overrides  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "kill_resume.json"))
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agent-r1-kill-"))
    shared = micro_overrides(base)
    # One uninterrupted run, timed (it also builds the shared data and index): kills are then drawn
    # across that duration, so each lands in the RL loop (rollout, update or checkpoint write)
    # rather than after a run that already finished.
    start = time.perf_counter()
    subprocess.run(_train_cmd({**shared, "train.iterations": 0, "train.out_dir": str(base / "warm")}, False),
                   capture_output=True, check=True)  # data + index, so every timed run starts alike
    t0 = time.perf_counter()
    subprocess.run(_train_cmd({**shared, "train.out_dir": str(base / "calibrate"),
                               "train.iterations": args.iterations}, False), capture_output=True, check=True)
    run_s = time.perf_counter() - t0
    delays = random_delays(args.trials, 0.25 * run_s, 0.95 * run_s, seed=0)
    print(f"uninterrupted run: {run_s:.1f}s; kills between "
          f"{0.25 * run_s:.1f}s and {0.95 * run_s:.1f}s", flush=True)
    trials = []
    for i, delay in enumerate(delays):
        over = {**shared, "train.out_dir": str(base / f"run{i}"), "train.iterations": args.iterations}
        result = kill_and_resume(over, args.iterations, delay)
        trials.append(asdict(result))
        print(f"trial {i}: kill after {delay:.1f}s killed={result.killed} resumed_ok={result.resumed_ok}", flush=True)
    report = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "trials": len(trials),
        "killed": sum(t["killed"] for t in trials),
        "resumed_cleanly": sum(t["resumed_ok"] for t in trials),
        "killed_and_resumed_cleanly": sum(t["killed"] and t["resumed_ok"] for t in trials),
        "uninterrupted_run_seconds": run_s,
        "wall_seconds": time.perf_counter() - start,
        "details": trials,
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "details"}))
    shutil.rmtree(base, ignore_errors=True)
    return 0 if report["resumed_cleanly"] == report["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
