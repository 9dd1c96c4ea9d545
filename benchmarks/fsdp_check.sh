#!/usr/bin/env bash
# The FSDP check, on a GPU host: `bash benchmarks/fsdp_check.sh` (from the repository root).
#
# Spawns min(2, GPUs) learner ranks over NCCL with train.fsdp=true (FSDP2 fully_shard over the decoder
# layers, agent_r1/training/distributed.py), runs one `learn` (GRPO, then PPO with a critic) on a batch
# rolled out once, and compares every rank's final weights with one plain learner on the same batch
# (max |diff| <= 1e-5, the CPU gloo test's bound; fp32). Exits non-zero on any failure.
# One GPU still checks the FSDP wrapping, the summed reduce-scatter and the sharded clip (world 1);
# two GPUs check the sharding across ranks. On CPU the same arithmetic runs over gloo in
# tests/integration/test_ddp.py::test_fsdp_shards_equal_one_learner_over_gloo.
# With 3 GPUs or more it then checks FSDP on Ray learner actors (ray.num_learners 2, NCCL, a GPU
# rollout worker): an iteration, a checkpoint, a resumed iteration and an evaluation against one
# unsharded learner, as tests/integration/test_ddp_ray.py::test_fsdp_learner_actors_equal_one_through_a_resume does
# over gloo on CPU. Fewer GPUs: that part says it was skipped.
# Both are the suite's FSDP tests (test_ddp.py, test_ddp_ray.py), run by pytest with AGENT_R1_TEST_DEVICE=cuda.
# Then the precision checks, the suite's tests on CUDA as well: a bf16 full fine-tune resume equal to the
# uninterrupted run, the KL reference equal to the policy at step 0, and (2 GPUs) learner ranks with
# uneven shares (3 vs 2 micro-batches, skipped rows, no loss tokens, a non-finite loss on one rank) over
# NCCL under a deadline and equal to one learner.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
STATUS=0
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "fsdp_check: no CUDA device visible to torch; run this on a GPU host (on CPU: pytest tests/integration/test_ddp.py tests/integration/test_ddp_ray.py -k fsdp)" >&2
  exit 1
fi
GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())")
# the suite's FSDP tests, on CUDA: min(2, GPUs) NCCL ranks against one learner, GRPO then PPO
export AGENT_R1_TEST_DEVICE=cuda
"$PY" -m pytest -q -p no:cacheprovider -rA "tests/integration/test_ddp.py::test_fsdp_shards_equal_one_learner_over_gloo" || STATUS=1
# FSDP on Ray learner actors: 2 learners + 1 rollout worker, a GPU each
if [ "$GPUS" -ge 3 ]; then
  "$PY" -m pytest -q -p no:cacheprovider -rA \
    "tests/integration/test_ddp_ray.py::test_fsdp_learner_actors_equal_one_through_a_resume" || STATUS=1
else
  echo "fsdp_check ray: skipped, $GPUS GPU(s); it needs 3 (2 learners, 1 rollout worker)"
fi
# precision: the bf16 resume and the step-0 KL reference (LoRA's reference is not among the GPU checks)
"$PY" -m pytest -q -p no:cacheprovider -rA tests/training/test_precision_state.py \
  -k "test_bf16_full_finetune_resume_equals_uninterrupted or (test_reference_equals_policy_at_step_zero and not lora)" \
  || STATUS=1
if [ "$GPUS" -ge 2 ]; then
  "$PY" -m pytest -q -p no:cacheprovider -rA \
    "tests/training/test_ddp_uneven.py::test_uneven_ranks_finish_and_equal_one_learner" || STATUS=1
else
  echo "fsdp_check uneven shares: skipped, $GPUS GPU; two NCCL ranks need 2"
fi
exit $STATUS
