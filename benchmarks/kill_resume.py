"""SIGKILL a training run at random moments (rollout, update, checkpoint write), resume it, and
count clean resumes. Writes benchmarks/results/kill_resume.json. `kill_and_resume` is one trial
(tests/reliability/test_kill_resume.py runs one).

A run killed before its first checkpoint has nothing to resume: `--resume` refuses it, so the trial
starts it over (as its user must; the partial history is moved aside) and is counted as
`restarted`, never as resumed. `completed_cleanly` counts both kinds of clean ending.

    python -m benchmarks.kill_resume --trials 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agent_r1.training.checkpoint import latest_checkpoint, load_state
from agent_r1.tracking.metrics import read_metrics
from benchmarks.common import machine, micro_overrides, result_path, write_json

# Kills are timed from the moment the run logs this step (step 0: the evaluation before iteration 1),
# so they land in the RL loop, not in the process start-up (imports, model build) that takes most of
# a micro run's wall time: drawn over the whole run, 9 of 10 kills landed before the first checkpoint.
AFTER_STEP = 0


@dataclass
class TrialResult:
    killed_after_s: float
    killed: bool  # False when the run finished before the kill came
    resumed_ok: bool
    final_iteration: int
    steps_logged: list[int]
    error: str = ""
    restarted: bool = False  # killed before its first checkpoint: started over (as a user must), not resumed


def _train_cmd(overrides: dict[str, object], resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "agent_r1.cli", "train"]
    for k, v in overrides.items():
        cmd += ["--set", f"{k}={json.dumps(v) if isinstance(v, (list, bool)) else v}"]
    return cmd + (["--resume"] if resume else [])


def _wait_for_step(proc: subprocess.Popen, metrics: Path, step: int, timeout_s: float) -> None:
    """Blocks until `metrics` logs `step` (or the process ends), so a kill lands inside the run
    whatever the machine's speed."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        if any(m.get("step", -1) >= step for m in read_metrics(metrics)):
            return
        time.sleep(0.05)


def kill_and_resume(overrides: dict[str, object], iterations: int, kill_after_s: float,
                    timeout_s: float = 600, after_step: int | None = None) -> TrialResult:
    """Starts `agent-r1 train`, SIGKILLs it `kill_after_s` after start (or after it logged
    `after_step`), resumes it to the end, and checks iteration count and logged steps."""
    out = Path(str(overrides["train.out_dir"]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_train_cmd(overrides, False), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    if after_step is not None:
        _wait_for_step(proc, out / "metrics.jsonl", after_step, timeout_s)
    time.sleep(kill_after_s)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    # `--resume` with no checkpoint is an error (never a silent restart), so a run killed before its
    # first checkpoint is started over, as its user would; the partial history is moved aside
    restarted = latest_checkpoint(out / "checkpoints") is None
    resume = subprocess.run(_train_cmd(overrides, not restarted), capture_output=True, text=True, env=env,
                            timeout=timeout_s)
    steps = [m["step"] for m in read_metrics(out / "metrics.jsonl")]
    ck = latest_checkpoint(out / "checkpoints")
    final = int(load_state(ck)["iteration"]) if ck else -1
    ok = resume.returncode == 0 and final == iterations and steps == sorted(set(steps)) and \
        steps[-iterations:] == list(range(1, iterations + 1))
    return TrialResult(kill_after_s, killed, ok, final, steps, "" if ok else resume.stderr[-2000:], restarted)


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
    rng = random.Random(0)
    delays = [rng.uniform(0.0, 0.95 * loop_s) for _ in range(args.trials)]
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
