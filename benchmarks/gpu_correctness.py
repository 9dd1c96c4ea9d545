"""GPU correctness checks of issue 30, on the first GPU host: `python benchmarks/gpu_correctness.py`
(run by benchmarks/fsdp_check.sh and benchmarks/gpu_smoke.sh). The same checks run on CPU in the
test suite; here they run on CUDA (and NCCL):

- uneven shares: two learner ranks whose shares differ (5 rows at micro-batch 0 and 1, skipped
  zero-advantage rows, a micro-batch without loss tokens, a non-finite loss on one rank, plain
  replicas), FSDP2 over NCCL, each finishing under a deadline with one learner's weights within
  1e-5 (tests/test_ddp_uneven.py); needs 2 GPUs, else it says it was skipped;
- bf16 resume: a bf16 full fine-tune stopped after 1 iteration and resumed to 2 equals 2 straight
  (tests/test_precision_state.py; bound 1e-5 here: CUDA reductions need not be bit-reproducible);
- the KL reference at step 0: ref log-probs equal the policy's, bf16 and fp32, its own copy and
  one loaded in `model.dtype` as on a resume (bound 0 on CPU; 1e-6 here, for the same reason).

Writes $OUT/gpu_correctness.json when $OUT is set, else benchmarks/results/gpu_correctness.json.
Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tiny_model():
    from agent_r1.data.synthetic import SyntheticConfig, generate_world
    from agent_r1.models.build import ModelConfig, build_local_model

    world = generate_world(SyntheticConfig(seed=0, n_people=90, n_cities=12, n_countries=4, n_landmarks=6))
    texts = [d.text for d in world.documents] + [q.question for q in world.questions()]
    torch.manual_seed(0)
    return build_local_model(texts, ModelConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
                                                vocab_size=400), seed=0)


def check(name: str, results: dict, fn) -> None:
    try:
        results[name] = {"ok": True, **fn()}
    except Exception as err:  # noqa: BLE001  (report every check, then fail)
        results[name] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
        traceback.print_exc()
    print(f"gpu_correctness {name}: {json.dumps(results[name])}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        sys.exit("gpu_correctness: no CUDA device visible to torch; on CPU these checks are "
                 "pytest tests/test_ddp_uneven.py tests/test_precision_state.py")
    from tests import test_ddp_uneven as U
    from tests import test_precision_state as P

    model, tok = tiny_model()
    results: dict = {"gpus": torch.cuda.device_count(), "device": torch.cuda.get_device_name(0)}

    def uneven():
        if torch.cuda.device_count() < 2:
            return {"skipped": f"{torch.cuda.device_count()} GPU; two NCCL ranks need 2"}
        base = U.rollout_groups(model, tok, Path(tempfile.mkdtemp()) / "roll")
        return {"max_diff": U.check_uneven_ranks(Path(tempfile.mkdtemp()), model, tok, base, device="cuda")}

    def bf16_resume():
        diff = P.bf16_resume_diff(Path(tempfile.mkdtemp()), device="cuda")
        assert diff <= 1e-5, diff
        return {"max_diff": diff}

    def reference():
        gaps = {}
        for precision, dtype in (("fp32", "float32"), ("bf16", "float32"), ("bf16", "bfloat16"),
                                 ("fp32", "bfloat16")):
            for loaded in (False, True):
                gap = P.reference_kl_gap((model, tok), Path(tempfile.mkdtemp()), precision, dtype, loaded, "cuda")
                gaps[f"{precision}/{dtype}/{'loaded' if loaded else 'copy'}"] = gap
        assert max(gaps.values()) <= 1e-6, gaps
        return {"max_gap": gaps}

    check("uneven_shares_fsdp_nccl", results, uneven)
    check("bf16_resume", results, bf16_resume)
    check("reference_kl_zero", results, reference)
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_correctness.json").write_text(json.dumps(results, indent=1))
    return 0 if all(v["ok"] for v in results.values() if isinstance(v, dict)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
