"""SIGKILL a training run at random moments (rollout, update, checkpoint write), resume it, and
count clean resumes. Writes benchmarks/results/kill_resume.json.

A run killed before its first checkpoint has nothing to resume: `--resume` refuses it, so the trial
starts it over (as its user must; the partial history is moved aside) and is counted as
`restarted`, never as resumed. `completed_cleanly` counts both kinds of clean ending.

    python -m benchmarks.kill_resume --trials 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks.killtest import _train_cmd, _wait_for_step, kill_and_resume, random_delays
from benchmarks.common import machine, micro_overrides, result_path, write_json

# Kills are timed from the moment the run logs this step (step 0: the evaluation before iteration 1),
# so they land in the RL loop, not in the process start-up (imports, model build) that takes most of
# a micro run's wall time: drawn over the whole run, 9 of 10 kills landed before the first checkpoint.
AFTER_STEP = 0


def loop_seconds(overrides: dict[str, object], timeout_s: float = 600) -> float:
    """Seconds from the run logging AFTER_STEP to its end, for an uninterrupted run."""
    metrics = Path(str(overrides["train.out_dir"])) / "metrics.jsonl"
    proc = subprocess.Popen(_train_cmd(overrides, False), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_step(proc, metrics, AFTER_STEP, timeout_s)
        t0 = time.perf_counter()
        if proc.wait(timeout=timeout_s) != 0:
            raise SystemExit(f"the uninterrupted calibration run failed (exit {proc.returncode})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--out", default=str(result_path("kill_resume")))
    ap.add_argument("--work", default=None, help="a folder for the runs, kept (default: a temp folder, removed); "
                                                 "data and index of the micro run already there are reused")
    args = ap.parse_args(argv)
    base = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="agent-r1-kill-"))
    shared = micro_overrides(base)
    # One uninterrupted run, its RL loop timed (a first run builds the shared data and index): kills
    # are then drawn across the loop, so each lands in a rollout, an update or a checkpoint write
    # (before the first checkpoint, the trial is a restart) rather than after the run finished.
    start = time.perf_counter()
    if not (base / "index").exists():  # data + index, so every timed run starts alike
        subprocess.run(_train_cmd({**shared, "train.iterations": 0, "train.out_dir": str(base / "warm")}, False),
                       capture_output=True, check=True)
    loop_s = loop_seconds({**shared, "train.out_dir": str(base / "calibrate"), "train.iterations": args.iterations})
    delays = random_delays(args.trials, 0.0, 0.95 * loop_s, seed=0)
    print(f"uninterrupted RL loop (after step {AFTER_STEP} is logged): {loop_s:.1f}s; kills between "
          f"0s and {0.95 * loop_s:.1f}s after it", flush=True)
    trials = []
    for i, delay in enumerate(delays):
        over = {**shared, "train.out_dir": str(base / f"run{i}"), "train.iterations": args.iterations}
        result = kill_and_resume(over, args.iterations, delay, after_step=AFTER_STEP)
        trials.append(asdict(result))
        print(f"trial {i}: kill after {delay:.1f}s killed={result.killed} restarted={result.restarted} "
              f"ok={result.resumed_ok}", flush=True)
    # `resumed_ok` is the trial's whole check (exit 0, every iteration once); a restarted trial
    # passes it without resuming anything, so resumes and restarts are counted apart
    resumed = [t for t in trials if not t["restarted"]]
    report = {
        "machine": machine(),
        "trials": len(trials),
        "killed": sum(t["killed"] for t in trials),
        "restarted": len(trials) - len(resumed),
        "completed_cleanly": sum(t["resumed_ok"] for t in trials),
        "resumed_cleanly": sum(t["resumed_ok"] for t in resumed),
        "killed_and_resumed_cleanly": sum(t["killed"] and t["resumed_ok"] for t in resumed),
        "killed_and_restarted_cleanly": sum(t["killed"] and t["resumed_ok"] and t["restarted"] for t in trials),
        "kill_after_step": AFTER_STEP,  # each trial's killed_after_s counts from that step's log line
        "uninterrupted_loop_seconds": loop_s,
        "wall_seconds": time.perf_counter() - start,
        "details": trials,
    }
    write_json(Path(args.out), report)
    print(json.dumps({k: v for k, v in report.items() if k != "details"}))
    if not args.work:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if report["completed_cleanly"] == report["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
