"""Tensor-level RL algorithms: advantages (advantages.py, GiGPO in step_advantages.py), losses and KL
(losses.py), importance weights (correction.py), each chosen by name from a registry.

Shapes follow one convention: token tensors [B, T] float32, masks 0/1 float
[B, T] (1 on policy-generated *action* tokens), per-trajectory scores [B].
"""

from agent_r1.algos.advantages import (
    ADV_ESTIMATORS,
    AdvantageInputs,
    AdvantageOutputs,
    compute_gae,
    compute_grpo,
    compute_reinforce_pp,
    compute_reinforce_pp_baseline,
    compute_rloo,
    get_adv_estimator,
    needs_critic,
    register_adv_estimator,
)
from agent_r1.algos.losses import (
    AGG_MODES,
    KL_PENALTIES,
    POLICY_LOSSES,
    aggregate_loss,
    entropy_bonus,
    cispo_policy_loss,
    entropy_from_logits,
    get_kl_penalty,
    get_policy_loss,
    gspo_policy_loss,
    kl_penalty,
    loss_denominator,
    ppo_policy_loss,
    value_loss,
    vanilla_policy_loss,
)
from agent_r1.algos.masked import masked_mean, masked_sum, masked_var, masked_whiten
from agent_r1.algos.step_advantages import GiGPOConfig, compute_step_advantages  # registers "gigpo"

__all__ = [
    "compute_gae",
    "compute_grpo",
    "compute_rloo",
    "compute_reinforce_pp",
    "compute_reinforce_pp_baseline",
    "masked_sum",
    "masked_mean",
    "masked_var",
    "masked_whiten",
    "AGG_MODES",
    "aggregate_loss",
    "loss_denominator",
    "ppo_policy_loss",
    "vanilla_policy_loss",
    "gspo_policy_loss",
    "cispo_policy_loss",
    "value_loss",
    "entropy_from_logits",
    "entropy_bonus",
    "POLICY_LOSSES",
    "get_policy_loss",
    "KL_PENALTIES",
    "kl_penalty",
    "get_kl_penalty",
    "ADV_ESTIMATORS",
    "AdvantageInputs",
    "AdvantageOutputs",
    "register_adv_estimator",
    "get_adv_estimator",
    "needs_critic",
    "GiGPOConfig",
    "compute_step_advantages",
]
