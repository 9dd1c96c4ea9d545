"""The off-policy correction of asynchronous training: decoupled PPO with a truncated behaviour weight.

With bounded staleness (`train.max_staleness` >= 1) a batch may have been sampled by an older
policy than the one being updated. Three policies are then in play (AReaL's decoupled PPO, Fu et
al. 2025, "AReaL: a large-scale asynchronous reinforcement learning system for language reasoning"):

- behaviour  pi_behav: the weights that sampled the tokens; its log-probs come from the engine
  (`Turn.action_logprobs`, collated as `sampled_logprobs`);
- proximal   pi_prox:  the learner's weights when the update starts; its log-probs are the ones the
  trainer recomputes (`old_logp`), and the PPO ratio and its clip stay relative to it;
- current    pi_theta: the weights being optimised.

The per-token objective is

    L_t = w_t * max(-A_t * r_t, -A_t * clip(r_t, 1 - eps_low, 1 + eps_high)),
    r_t = pi_theta / pi_prox,   w_t = min(pi_prox / pi_behav, C)   (no gradient through w_t)

`w_t` corrects for sampling from pi_behav instead of pi_prox. It is truncated at C
(`algo.offpolicy_clip`) as in truncated importance sampling (Ionides 2008; verl's rollout
correction, token-level "TIS"; ms-swift's port of it defaults its threshold to 2.0): a token the stale policy found unlikely but the
proximal one likes cannot dominate the update. AReaL instead drops tokens whose weight exceeds its
cap (`behav_imp_weight_cap`); truncation keeps them, with a bounded weight.

Because w_t > 0, weighting the per-token loss by w_t equals multiplying the advantage by w_t
(max and min commute with a positive scale, the dual clip included), so the trainer feeds
`w * A` to the unchanged PPO loss (`offpolicy_advantages`).
"""

from __future__ import annotations

import torch

from agent_r1.algos.masked import masked_mean

__all__ = ["DEFAULT_OFFPOLICY_CLIP", "behaviour_weights", "offpolicy_advantages"]

DEFAULT_OFFPOLICY_CLIP = 2.0  # the rollout-correction threshold default of ms-swift (after verl's TIS)


def behaviour_weights(proximal_logp: torch.Tensor, behaviour_logp: torch.Tensor, sampled_mask: torch.Tensor,
                      clip: float = DEFAULT_OFFPOLICY_CLIP) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token truncated importance weights w = min(exp(proximal - behaviour), clip).

    proximal_logp, behaviour_logp, sampled_mask: [B, T] (mask 1 on tokens the engine sampled).
    Returns (w [B, T], metrics). w is exactly 1 where nothing was sampled (prompt, observations,
    padding: no behaviour probability exists there), and carries no gradient.
    Metrics: offpolicy/weight_mean (after truncation), offpolicy/weight_max (before),
    offpolicy/truncated_frac (share of sampled tokens above `clip`), offpolicy/behaviour_kl
    (mean proximal - behaviour log-prob, an estimate of KL(behav || prox)).
    """
    if clip <= 0:
        raise ValueError(f"algo.offpolicy_clip must be > 0 (got {clip}); 2.0 is the usual default")
    sampled = sampled_mask > 0
    log_w = torch.where(sampled, (proximal_logp - behaviour_logp).detach(), torch.zeros_like(proximal_logp))
    raw = torch.exp(log_w.clamp(max=20.0))  # exp(20) is far above any clip: the clamp only avoids inf
    weights = torch.clamp(raw, max=clip)
    if not bool(sampled.any()):
        return weights, {"offpolicy/weight_mean": 1.0, "offpolicy/weight_max": 1.0,
                         "offpolicy/truncated_frac": 0.0, "offpolicy/behaviour_kl": 0.0}
    mask = sampled.to(proximal_logp.dtype)
    metrics = {
        "offpolicy/weight_mean": float(masked_mean(weights, mask)),
        "offpolicy/weight_max": float(raw[sampled].max()),
        "offpolicy/truncated_frac": float(masked_mean((raw > clip).to(mask.dtype), mask)),
        "offpolicy/behaviour_kl": float(masked_mean(log_w, mask)),
    }
    return weights, metrics


def offpolicy_advantages(advantages: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """The advantages the PPO loss sees: A * w (w > 0, so the clipped objective scales by w);
    `weights` None (synchronous training) returns `advantages` itself, untouched."""
    return advantages if weights is None else advantages * weights
