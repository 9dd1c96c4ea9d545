"""Same command, same result: two runs of one recipe on this machine give the same metrics and the
same weights, bit for bit, whether the cores are idle or busy with another job.

`make run` is this property at full size (a rerun from the same warm start gives identical
metrics, idle or loaded); here the micro experiment runs end to end (world, index, SFT warm start,
RL) twice in fresh processes with 2 threads, as `make run` uses, the second beside a process that
keeps a core busy. Only timings may differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.pipeline_helpers import write_micro_params

REPO = Path(__file__).resolve().parents[2]
TIMING_SUFFIXES = ("_s", "_per_s", "_ms")  # wall-clock figures: the only keys allowed to differ


def _run(root: Path) -> tuple[list[dict], str]:
    root.mkdir(parents=True)
    params = write_micro_params(root / "params.yaml", root)
    tree = yaml.safe_load(params.read_text())
    tree["train"].update({"threads": 2, "iterations": 3, "init_from": "sft", "out_dir": str(root / "run"),
                          "runs_dir": str(root / "runs")})
    tree["sft"]["out_dir"] = ""  # the warm start is trained inside this run, as `make run` does
    params.write_text(yaml.safe_dump(tree, sort_keys=False))
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    subprocess.run([sys.executable, "-m", "agent_r1.cli", "train", "--params", str(params), "--no-mlflow"],
                   cwd=root, env=env, check=True, capture_output=True, timeout=300)
    rows = [json.loads(line) for line in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    kept = [{k: v for k, v in r.items() if not k.endswith(TIMING_SUFFIXES)} for r in rows]
    final = sorted((root / "run" / "checkpoints").glob("iter_*"))[-1]
    weights = hashlib.sha256((final / "model.safetensors").read_bytes()).hexdigest()
    return kept, weights


def test_a_rerun_idle_or_loaded_gives_the_same_metrics_and_weights(tmp_path):
    idle_metrics, idle_weights = _run(tmp_path / "idle")
    # a busy core while the second run trains: torch's thread pool then waits on the OS scheduler,
    # which must change only how long the run takes
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded_metrics, loaded_weights = _run(tmp_path / "loaded")
    finally:
        burner.kill()
        burner.wait()
    assert len(idle_metrics) >= 4  # step 0's evaluation and 3 iterations
    assert any("reward_mean" in r for r in idle_metrics)
    for a, b in zip(idle_metrics, loaded_metrics, strict=True):
        assert a == b, f"step {a.get('step')}: {[k for k in a if a[k] != b.get(k)]} differ"
    assert idle_weights == loaded_weights
