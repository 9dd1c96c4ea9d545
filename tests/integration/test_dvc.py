"""`dvc repro` from a clean clone, on a micro params.yaml, produces the metrics and plots files, and
`dvc metrics show` / `dvc plots show` read them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline_helpers import write_micro_params

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent


def _dvc(clone: Path, *args: str, timeout: int = 600) -> str:
    env = {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run([str(VENV / "bin" / "dvc"), *args], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"dvc {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.slow
def test_dvc_repro_in_clean_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    # the working tree's pipeline files (a clone has the last commit only)
    for rel in ("dvc.yaml", "flows"):
        src, dst = ROOT / rel, clone / rel
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    if (ROOT / ".dvc" / "config").exists():
        shutil.copytree(ROOT / ".dvc", clone / ".dvc", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("tmp", "cache"))
    else:
        _dvc(clone, "init", "-q")
    (clone / ".venv").symlink_to(VENV)  # the stages call .venv/bin/...: `make install` in a real clone
    write_micro_params(clone / "params.yaml")  # relative paths: outputs land inside the clone

    out = _dvc(clone, "repro")
    for stage in ("prepare", "index", "sft", "train", "evaluate"):
        assert f"Running stage '{stage}'" in out
    run = clone / "runs" / "dvc" / "train"  # DVC pins its stages' folders (dvc.yaml)
    evaluation = json.loads((run / "eval_metrics.json").read_text())
    assert set(evaluation["test"]) == {"rl", "start"} and evaluation["test"]["rl"]["n"] == 4
    assert "eval/em" in json.loads((run / "final_metrics.json").read_text())
    assert [r["step"] for r in json.loads((run / "plots" / "train.json").read_text())] == [1, 2]
    lock = (clone / "dvc.lock").read_text()
    assert "data/synthetic" in lock and "runs/dvc/train/checkpoints" in lock

    metrics = json.loads(_dvc(clone, "metrics", "show", "--json"))
    files = next(iter(metrics.values()))["data"]  # keyed by revision ("" or "workspace")
    assert files["runs/dvc/train/eval_metrics.json"]["data"]["test"]["rl"]["em"] >= 0
    plots = json.loads(_dvc(clone, "plots", "show", "--json"))
    assert not plots.get("errors"), plots.get("errors")
    assert {"reward per iteration", "held-out EM", "SFT loss"} <= set(plots["data"])
    assert "up to date" in _dvc(clone, "status")  # a second repro would skip every stage
