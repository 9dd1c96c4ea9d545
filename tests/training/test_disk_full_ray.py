"""A full disk on a Ray learner (its checkpoint save, its metrics) reaches the driver wrapped by Ray:
`RayTaskError(DiskFullError)` or `RayTaskError(OSError)`. fit_loop unwraps it and stops the run with the
same one-line DiskFullError as in-process, naming the folder and the run to resume."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import pytest
from ray.exceptions import RayTaskError

from agent_r1.training.checkpoint import DiskFullError
from agent_r1.training.trainer import fit_loop


class SavingFails:
    """A backend whose first checkpoint save fails on a Ray learner with `cause`."""

    def __init__(self, tmp_path, cause):
        self.cfg = SimpleNamespace(train=SimpleNamespace(iterations=2, eval_every=0, checkpoint_every=1,
                                                         out_dir=str(tmp_path / "run")))
        self.iteration, self.eval_samples, self.sink, self.cause = 0, [], None, cause

    def train_step(self):
        self.iteration += 1
        return {"policy_loss": 0.0}

    def evaluate(self):
        return {}

    def _log(self, step, metrics):
        pass

    def save(self):
        raise RayTaskError("Learner.save", "Traceback (most recent call last): ...", self.cause).as_instanceof_cause()


@pytest.mark.parametrize("cause", [
    OSError(errno.ENOSPC, "No space left on device", "/runs/r1/checkpoints/.tmp_iter_000001/model.safetensors"),
    DiskFullError("/runs/r1/checkpoints"),
], ids=["oserror", "diskfull"])
def test_a_ray_learners_full_disk_stops_the_run_with_the_resume_hint(tmp_path, cause):
    with pytest.raises(DiskFullError) as err:
        fit_loop(SavingFails(tmp_path, cause))
    assert "checkpoints" in str(err.value) and f"--resume {tmp_path / 'run'}" in str(err.value)


def test_other_ray_errors_pass_through(tmp_path):
    with pytest.raises(RayTaskError):
        fit_loop(SavingFails(tmp_path, ValueError("a bug")))
