"""A training process killed with SIGKILL resumes from its last complete checkpoint with no
step lost or logged twice (the 10-kill version is benchmarks/kill_resume.py)."""

from __future__ import annotations

from benchmarks.common import micro_overrides  # the benchmark's micro run, shared
from benchmarks.kill_resume import kill_and_resume


def test_sigkill_mid_run_then_resume(tmp_path):
    # killed shortly after iteration 2 was logged: inside iteration 3 (rollout, update or the
    # checkpoint write), whatever the machine's speed
    result = kill_and_resume(micro_overrides(tmp_path), iterations=6, kill_after_s=0.3, after_step=2)
    assert result.killed, "the run ended before the kill: the test would prove nothing"
    assert result.resumed_ok, result
    assert result.final_iteration == 6
    assert result.steps_logged[-6:] == [1, 2, 3, 4, 5, 6]
