"""Kill-and-resume trials: SIGKILL a training process at a random moment, resume, and check that
nothing was lost or duplicated. Used by tests/reliability and benchmarks/kill_resume.py."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from agent_r1.training.checkpoint import latest_checkpoint, load_state
from agent_r1.training.metrics_log import read_metrics


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


def random_delays(n: int, low: float, high: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(low, high) for _ in range(n)]
