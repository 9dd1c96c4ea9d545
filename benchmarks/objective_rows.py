"""The objectives beyond GRPO (DAPO, GSPO, Dr. GRPO, CISPO, GiGPO) as benchmark rows, shared by the learning
benchmark (learning.py `--variants`) and the paper table (paper_table.py `--methods`, its rows beyond the paper):
name -> (label, overrides over GRPO's run). Each keeps its reference's settings over the same budget (iterations,
prompts and samples per prompt); DAPO's dynamic sampling rolls out more prompts per iteration to fill its batch,
so it does more rollout work, reported in its rows. The overrides assume rollout.max_total_tokens 768 (both
benchmarks' setting).
"""

from __future__ import annotations

from typing import Any

OBJECTIVES: dict[str, tuple[str, dict[str, Any]]] = {
    # GSPO (Zheng et al. 2025): one length-normalised ratio per trajectory, clipped in its paper's range
    "gspo": ("GSPO (sequence-level ratio)",
             {"algo.adv_estimator": "grpo", "algo.policy_loss": "gspo", "algo.clip_low": 3e-4, "algo.clip_high": 4e-4,
              "algo.loss_agg": "seq-mean-token-mean"}),
    # CISPO (MiniMax-M1): detached importance weights capped at 5 (TRL's cap), every token keeps a gradient
    "cispo": ("CISPO (clipped IS weights)", {"algo.adv_estimator": "grpo", "algo.policy_loss": "cispo",
                                             "algo.clip_high": 4.0}),
    # Dr. GRPO (Liu et al. 2025): no std division; token sums over a constant (rollout.max_total_tokens)
    "dr_grpo": ("Dr. GRPO (no std, constant normaliser)",
                {"algo.adv_estimator": "dr_grpo", "algo.loss_agg": "seq-mean-token-sum-norm"}),
    # DAPO (Yu et al. 2025): clip-higher, dynamic sampling (up to 3 extra rounds of prompts), the soft
    # overlong penalty over the last 20% of rollout.max_total_tokens (768: 153 tokens)
    "dapo": ("DAPO (clip-higher, dynamic sampling, overlong shaping)",
             {"algo.adv_estimator": "grpo", "algo.clip_high": 0.28, "algo.dynamic_sampling.enabled": True,
              "algo.dynamic_sampling.max_extra_rounds": 3, "reward.overlong_buffer": 153}),
    # step-level groups over GRPO (Feng et al. 2025)
    "gigpo": ("GiGPO (step-level groups)", {"algo.adv_estimator": "gigpo"}),
}
