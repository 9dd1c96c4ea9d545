"""GPU correctness checks of issue 30, on the first GPU host: `python -m benchmarks.gpu_correctness`
(run by benchmarks/fsdp_check.sh and benchmarks/gpu_smoke.sh). The same tests run on CPU in the
test suite; here pytest runs them on CUDA (and NCCL), with AGENT_R1_TEST_DEVICE=cuda:

- uneven shares: two learner ranks whose shares differ (5 rows at micro-batch 0 and 1, skipped
  zero-advantage rows, a micro-batch without loss tokens, a non-finite loss on one rank, plain
  replicas), FSDP2 over NCCL, each finishing under a deadline with one learner's weights within
  1e-5 (tests/training/test_ddp_uneven.py); needs 2 GPUs, else it says it was skipped;
- bf16 resume: a bf16 full fine-tune stopped after 1 iteration and resumed to 2 equals 2 straight
  (tests/training/test_precision_state.py; bound 1e-5 here: CUDA reductions need not be bit-reproducible);
- the KL reference at step 0: ref log-probs equal the policy's, bf16 and fp32, its own copy and
  one loaded in `model.dtype` as on a resume (bound 0 on CPU; 1e-6 here, for the same reason).

Each test records its figure (`record_property`), read back from pytest's JUnit XML. Writes
$OUT/gpu_correctness.json when $OUT is set, else benchmarks/results/gpu_correctness.json. Exits
non-zero on any failure. `--device cpu` runs the same selection on the CPU (the smoke test's check
of this script; slow: the full CPU cases).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, result_path, write_json

# check name -> (pytest selection, whether it needs 2 GPUs)
CHECKS = {
    "uneven_shares_fsdp_nccl": (["tests/training/test_ddp_uneven.py::test_uneven_ranks_finish_and_equal_one_learner"], True),
    "bf16_resume": (["tests/training/test_precision_state.py::test_bf16_full_finetune_resume_equals_uninterrupted"], False),
    # LoRA's reference (the policy with its adapters off) is not among the GPU checks
    "reference_kl_zero": (["tests/training/test_precision_state.py::test_reference_equals_policy_at_step_zero",
                           "-k", "not lora"], False),
}


def junit_cases(xml: Path) -> list[dict[str, Any]]:
    """Each test case of a JUnit XML file: its name, outcome and recorded properties."""
    cases = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        props = {p.get("name"): float(p.get("value")) for p in case.iter("property")}
        cases.append({"name": case.get("name"), "outcome": outcome, **props})
    return cases


def run_check(selection: list[str], device: str, keyword: str | None = None) -> dict[str, Any]:
    """pytest on `selection` (narrowed by the -k expression `keyword`) with the tests' device set; ok
    when every case passed."""
    if keyword:
        k = selection.index("-k") + 1 if "-k" in selection else None
        selection = ([*selection[:k], f"({selection[k]}) and ({keyword})", *selection[k + 1:]] if k
                     else [*selection, "-k", keyword])
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        env = {**os.environ, "AGENT_R1_TEST_DEVICE": device}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                               *selection], cwd=ROOT, env=env, capture_output=True, text=True)
        cases = junit_cases(xml) if xml.exists() else []
    ok = proc.returncode == 0 and bool(cases) and all(c["outcome"] == "passed" for c in cases)
    out: dict[str, Any] = {"ok": ok, "cases": cases}
    if not ok:
        out["pytest_tail"] = (proc.stdout + proc.stderr)[-3000:]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (the checks) or cpu (this script's own smoke check)")
    ap.add_argument("--only", default=None, help=f"comma list of {list(CHECKS)}")
    ap.add_argument("-k", dest="keyword", default=None, help="pytest -k expression narrowing every check's cases")
    args = ap.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_correctness: no CUDA device visible to torch; on CPU these checks are "
                 "pytest tests/training/test_ddp_uneven.py tests/training/test_precision_state.py")
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    results: dict[str, Any] = {"gpus": gpus, "device": torch.cuda.get_device_name(0) if gpus else "cpu"}
    for name in (args.only.split(",") if args.only else CHECKS):
        selection, two_gpus = CHECKS[name]
        if two_gpus and args.device == "cuda" and gpus < 2:
            results[name] = {"ok": True, "skipped": f"{gpus} GPU; two NCCL ranks need 2"}
        else:
            results[name] = run_check(selection, args.device, args.keyword)
        print(f"gpu_correctness {name}: {json.dumps({k: v for k, v in results[name].items() if k != 'pytest_tail'})}",
              flush=True)
    write_json(Path(os.environ["OUT"]) / "gpu_correctness.json" if os.environ.get("OUT")
               else result_path("gpu_correctness"), results)
    return 0 if all(v["ok"] for v in results.values() if isinstance(v, dict)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
