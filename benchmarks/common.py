"""What every benchmark shares: where results and work files go, what the machine was, the micro
configuration of the smoke runs.

- `results_dir()` / `result_path(name)`: benchmarks/results/ (committed figures; README's come from
  them), or $AGENT_R1_BENCH_RESULTS when set (the smoke tests point it at a tmp folder).
- `work_dir(name)`: benchmarks/.work/<name> (data, indexes, warm starts; ignored by git), or
  $AGENT_R1_BENCH_WORK/<name> when set.
- `machine(device, **extra)`: what a figure was measured on (CPU model, cores, memory, versions,
  commit, load average), plus `extra` keys.
- `write_json(path, doc)`: writes a results document (parents made), says where.
- `update_results(path, key, section)`: read-modify-write of one key of a results JSON, so the
  benchmarks that share a file (scale.json) keep each other's sections.
- `micro_overrides(work)`: the smallest run that still trains (1-layer 32-wide model, 60 people,
  2 turns): the kill/resume benchmark's runs and every benchmark's smoke run.
- `run_child(module, args)` / `child_result(doc)`: a benchmark's measurement in a fresh process of its
  own (so one configuration's allocator state or CUDA context never lifts another's peak).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS_ENV = "AGENT_R1_BENCH_RESULTS"
WORK_ENV = "AGENT_R1_BENCH_WORK"


def results_dir() -> Path:
    """benchmarks/results, or $AGENT_R1_BENCH_RESULTS (read at each call, not at import)."""
    return Path(os.environ.get(RESULTS_ENV) or ROOT / "benchmarks" / "results")


def result_path(name: str) -> Path:
    return results_dir() / f"{name}.json"


def work_dir(name: str) -> Path:
    """benchmarks/.work/<name>, or $AGENT_R1_BENCH_WORK/<name>."""
    return Path(os.environ.get(WORK_ENV) or ROOT / "benchmarks" / ".work") / name


def pct(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank); nan for none."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(cwd: Path = ROOT) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return None


def machine(device: str = "cpu", at_start: bool = True, **extra: Any) -> dict[str, Any]:
    """What the figures were measured on; `extra` (a note, a library's version) is added last.
    `at_start=False` leaves out the load average (a caller that records it before and after its runs)."""
    import torch
    import transformers

    from agent_r1.precision import resolve_precision

    info = {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "memory_gib": memory_gib(), "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "platform": platform.platform(), "device": device,
            "commit": git_commit(), "load_average_at_start": loadavg(),
            # what `train.precision: auto` resolves to here (a figure's precision, where it left auto)
            "auto_precision": resolve_precision("auto", torch.device(device), warn=False)}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    if not at_start:
        del info["load_average_at_start"]
    return {**info, **extra}


def shown(path: Path) -> str:
    """`path` relative to the repository when it lies inside, else as is (a tmp folder)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def write_json(path: Path, doc: Any, indent: int = 1) -> Path:
    """Writes `doc` as JSON (trailing newline) at `path`, making its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=indent, default=str) + "\n")
    print(f"wrote {shown(path)}")
    return path


def update_results(path: Path, key: str, section: dict[str, Any]) -> dict[str, Any]:
    """Writes `section` under `key` of the JSON at `path`, keeping its other keys; returns the whole."""
    path = Path(path)
    result = json.loads(path.read_text()) if path.exists() else {}
    result[key] = section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def micro_overrides(work: Path, iterations: int = 6) -> dict[str, Any]:
    """The micro run: every folder under `work` (data, index, run, the runs' digest cache)."""
    work = Path(work)
    return {"data.dir": str(work / "data"), "search.index_dir": str(work / "index"),
            "train.out_dir": str(work / "run"), "train.runs_dir": str(work / "runs"),  # digest cache too
            "data.n_people": 60, "model.hidden_size": 32,
            "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 64, "model.vocab_size": 300,
            "train.iterations": iterations, "train.checkpoint_every": 1, "train.prompts_per_iter": 4,
            "rollout.n_samples": 2, "rollout.max_turns": 2, "rollout.max_tokens_per_turn": 6,
            "train.eval_every": 0, "train.eval_size": 2, "train.threads": 1, "train.init_from": ""}


CHILD_MARK = "BENCH_CHILD_RESULT "  # vLLM logs to stdout, at shutdown too: the result is the marked line


def child_result(doc: Any) -> None:
    """What a child process (`run_child`) answers: one marked JSON line on stdout."""
    print(CHILD_MARK + json.dumps(doc), flush=True)


def run_child(module: str, args: list[str], timeout: float | None = None) -> dict[str, Any]:
    """`python -m benchmarks.<module> *args` in a fresh process; its `child_result`, or the error."""
    try:
        proc = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(CHILD_MARK)]
    if proc.returncode != 0 or not lines:
        return {"error": ((proc.stderr or proc.stdout) if proc.returncode else "no result line:\n" + proc.stdout)
                [-4000:], "returncode": proc.returncode}
    return json.loads(lines[-1][len(CHILD_MARK):])
