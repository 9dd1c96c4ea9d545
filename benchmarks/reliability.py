"""Reliability counts for README: inputs tried, faults injected, resumed cleanly, records lost.
Writes benchmarks/results/reliability.json.

- inputs tried: a fixed number of model-output fuzz cases (tests/reliability/test_fuzz_rollout.py's
  generator: random bytes decoded with errors="replace", 1 MB outputs, nested/unclosed tags, JSON of
  the wrong types, thousands of calls in one turn) stepped through the env for both formats, with
  the same invariants as the tests (never raises, <= max_calls_per_turn calls run, bounded
  observation, the observation says what was wrong);
- faults injected: the fault-injection tests (tool raising/hanging/huge, tantivy index missing or
  corrupt, Elasticsearch stopped mid-call and mid-training then resumed, NaN/inf updates, MLflow
  unreachable then back) run here under pytest, each passing test a fault handled as specified;
- resumed cleanly: SIGKILL trials from benchmarks/results/kill_resume.json (benchmarks/kill_resume.py);
- records lost: 0 when the MLflow-unreachable test passes (it asserts every buffered record was
  flushed and read back from the store).

    python benchmarks/reliability.py --cases 20000
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAULT_TESTS = {  # pytest node id -> the fault it injects
    "tests/test_env.py::test_each_failure_kind_becomes_observation":
        "tool raises / hangs past timeout / bad call (9 kinds)",
    "tests/test_env.py::test_tool_runner_clips_huge_results": "tool returns 100 kB",
    "tests/test_tantivy.py::test_missing_and_corrupt_index": "tantivy index missing or corrupt",
    "tests/test_elasticsearch.py::test_retries_then_clear_error_when_server_stops": "Elasticsearch stopped mid-call",
    "tests/reliability/test_retriever_faults.py::test_runner_lets_service_outage_through_but_not_tool_bugs":
        "search service down vs tool bug",
    "tests/reliability/test_retriever_faults.py::test_es_stopped_mid_training_fails_clearly_then_resumes":
        "Elasticsearch stopped mid-training, restarted, --resume",
    "tests/test_trainer.py::test_non_finite_updates_are_skipped_then_stop": "NaN/inf loss: skipped, then stop",
    "tests/test_tracking.py::test_unreachable_server_buffers_then_flushes": "MLflow unreachable, then back",
}
TRACKING_TEST = "tests/test_tracking.py::test_unreachable_server_buffers_then_flushes"


def run_fuzz(cases: int, seed: int) -> dict:
    from tests.reliability.test_fuzz_rollout import MAX_CALLS, build_world, check_step, fuzz_cases

    kinds: dict[str, int] = {}
    failures: list[str] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        world = build_world(Path(tmp))
        for kind, fmt, text in fuzz_cases(seed, cases):
            kinds[kind] = kinds.get(kind, 0) + 1
            try:
                check_step(world, fmt, text)
            except Exception as exc:  # AssertionError (a broken invariant) or anything the env raised
                failures.append(f"{kind}/{fmt}: {type(exc).__name__}: {str(exc)[:200]}")
    return {"inputs_tried": sum(kinds.values()), "by_kind": kinds, "failures": len(failures),
            "failure_samples": failures[:5], "max_calls_per_turn": MAX_CALLS,
            "calls_reaching_tools": world.executed(), "seconds": round(time.perf_counter() - start, 1)}


def run_fault_tests() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                               *FAULT_TESTS], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        outcome: dict[str, str] = {}
        if xml.exists():
            for case in ET.parse(xml).getroot().iter("testcase"):
                node = f"{case.get('file') or case.get('classname', '').replace('.', '/') + '.py'}::{case.get('name')}"
                status = "passed"
                for child in case:
                    if child.tag in ("failure", "error"):
                        status = "failed"
                    elif child.tag == "skipped":
                        status = "skipped"
                outcome[node] = status
    rows = [{"test": t, "fault": f, "outcome": outcome.get(t, "not run")} for t, f in FAULT_TESTS.items()]
    return {"faults": rows, "handled": sum(r["outcome"] == "passed" for r in rows), "injected": len(rows),
            "pytest_returncode": proc.returncode, "seconds": round(seconds, 1),
            "pytest_tail": proc.stdout[-1500:] if proc.returncode else ""}


def _killed_and_resumed(kill: dict) -> int:
    """Trials whose SIGKILL landed before the run ended and that then resumed cleanly."""
    return sum(bool(t["killed"] and t["resumed_ok"]) for t in kill.get("details", []))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-fault-tests", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "reliability.json"))
    args = ap.parse_args()

    fuzz = run_fuzz(args.cases, args.seed)
    print(f"fuzz: {fuzz['inputs_tried']} inputs, {fuzz['failures']} failures, {fuzz['seconds']} s", flush=True)
    faults = {"skipped": True} if args.skip_fault_tests else run_fault_tests()
    if not args.skip_fault_tests:
        print(f"faults: {faults['handled']}/{faults['injected']} handled, {faults['seconds']} s", flush=True)
    kill_path = ROOT / "benchmarks" / "results" / "kill_resume.json"
    kill = json.loads(kill_path.read_text()) if kill_path.exists() else None
    tracking_ok = any(r["test"] == TRACKING_TEST and r["outcome"] == "passed" for r in faults.get("faults", []))
    report = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "inputs_tried": fuzz["inputs_tried"],
        "inputs_failed": fuzz["failures"],
        "faults_injected": faults.get("injected", 0) + (kill["killed"] if kill else 0),
        "faults_handled": faults.get("handled", 0) + (_killed_and_resumed(kill) if kill else 0),
        "sigkill_trials": kill["trials"] if kill else None,
        "sigkill_killed": kill["killed"] if kill else None,
        "resumed_cleanly": kill["resumed_cleanly"] if kill else None,
        "killed_and_resumed_cleanly": _killed_and_resumed(kill) if kill else None,
        "records_lost": 0 if tracking_ok else None,  # None: the MLflow-unreachable test did not pass here
        "fuzz": fuzz,
        "fault_tests": faults,
        "kill_resume_source": str(kill_path.relative_to(ROOT)) if kill else None,
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k not in ("fuzz", "fault_tests")}, indent=1))
    ok = fuzz["failures"] == 0 and (args.skip_fault_tests or faults["handled"] == faults["injected"])
    return 0 if ok and (kill is None or kill["resumed_cleanly"] == kill["trials"]) else 1


if __name__ == "__main__":
    sys.exit(main())
