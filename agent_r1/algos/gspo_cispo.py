"""Two policy losses beyond PPO's token-level clip: GSPO (sequence-level ratio and clipping) and
CISPO (a clipped, stop-gradient importance weight on REINFORCE, so no token loses its gradient).

Both register in `POLICY_LOSSES` (``algo.policy_loss: gspo | cispo``) with the signature of
``ppo_policy_loss``: ``(log_probs, old_log_probs, advantages, action_mask, clip_low, clip_high,
dual_clip, agg, denom) -> (loss, metrics)`` and the same metric keys (clipfrac, clipfrac_lower,
approx_kl, ratio_mean). Masked tokens get an exactly-zero gradient even with NaN/inf there.

References (read for the definitions; the code here is written from them):
- GSPO: Zheng et al. 2025, "Group Sequence Policy Optimization", arXiv:2507.18071 (the GSPO-token
  form, eq. 13-17); verl ``compute_policy_loss_gspo`` (verl/trainer/ppo/core_algos.py); TRL
  ``importance_sampling_level="sequence"`` (trl/trainer/grpo_trainer.py).
- CISPO: MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning
  Attention", arXiv:2506.13585, section 3.1; TRL ``loss_type="cispo"``; verl ``compute_policy_loss_cispo``;
  ScaleRL (Khatri et al. 2025, arXiv:2510.13786) for the recommended cap.

Micro-batching: a row of a micro-batch is a whole sequence, so GSPO's per-row sequence ratio is
the one the whole mini-batch would compute; with `denom` from `loss_denominator` over the mini-batch
the accumulated gradient equals the one-shot gradient, as for PPO.
"""

from __future__ import annotations

import torch

from agent_r1.algos.losses import POLICY_LOSSES, _zero_masked, aggregate_loss, ppo_policy_loss
from agent_r1.algos.masked import masked_mean

__all__ = ["gspo_policy_loss", "cispo_policy_loss", "sequence_log_ratio"]

_MAX_LOG_RATIO = 20.0  # as ppo_policy_loss: exp(20) ~ 5e8, far past any clip, finite in fp32


def sequence_log_ratio(log_probs: torch.Tensor, old_log_probs: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """GSPO's length-normalised sequence log-ratio, [B]: log s_i = mean over row i's masked tokens of
    (logp - old_logp); 0 for a row without masked tokens. Differentiable (detach it where needed)."""
    log_ratio = _zero_masked(log_probs - old_log_probs, action_mask)
    n = (action_mask > 0).sum(dim=-1).clamp(min=1).to(log_ratio.dtype)
    return log_ratio.sum(dim=-1) / n


@POLICY_LOSSES.register("gspo")
def gspo_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
    dual_clip: float | None = None,
    agg: str = "seq-mean-token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO-token: PPO's clipped surrogate on the sequence ratio s_i = exp(mean_t log(pi/pi_old)).

    Each token's ratio is s_{i,t} = sg[s_i] * pi_t / sg[pi_t]: its value is row i's s_i (so the
    clip decides per sequence: a sequence outside [1 - clip_low, 1 + clip_high] on the side its
    advantage pushes loses every token's gradient), its gradient is s_i * grad log pi_t. With the
    advantage constant over a row (GRPO) and ``agg="seq-mean-token-mean"`` (the paper's 1/G sum_i
    1/|y_i| sum_t) the gradient is GSPO's sequence-level one, -A_i grad s_i; per-token advantages
    (the GSPO-token generalisation) are used as given.

    clip_low / clip_high: bounds on the *sequence* ratio, which stays far closer to 1 than token
    ratios: the paper uses 3e-4 / 4e-4 (verl's GSPO recipe too); PPO's 0.2 would clip almost
    nothing. dual_clip: as in PPO (for A < 0 the loss is capped at -A * c), on the sequence ratio.
    agg: honoured as given (verl forces "seq-mean-token-mean"; set ``algo.loss_agg`` to it for the paper's
    objective). On-policy (old = logp.detach()) s_i = 1 and the gradient is the REINFORCE gradient
    aggregated by `agg`.
    Metrics: clipfrac (masked tokens whose clipped term is taken), clipfrac_lower (dual-clip hits),
    approx_kl (token mean of old - new logp, as PPO's), ratio_mean (mean of s_i over rows with tokens).
    """
    seq_log = sequence_log_ratio(log_probs, old_log_probs, action_mask).detach()
    seq_log = seq_log.clamp(min=-_MAX_LOG_RATIO, max=_MAX_LOG_RATIO)
    logp = _zero_masked(log_probs, action_mask)
    log_s = seq_log[:, None] + (logp - logp.detach())  # value log s_i, gradient d log pi_t
    loss, metrics = ppo_policy_loss(log_s, torch.zeros_like(log_s), advantages, action_mask, clip_low=clip_low,
                                    clip_high=clip_high, dual_clip=dual_clip, agg=agg, denom=denom)
    token_log_ratio = _zero_masked(log_probs - old_log_probs, action_mask).detach()
    rows = (action_mask > 0).any(dim=-1).to(seq_log.dtype)
    metrics["approx_kl"] = masked_mean(-token_log_ratio, action_mask)
    metrics["ratio_mean"] = masked_mean(torch.exp(seq_log), rows)
    return loss, metrics


@POLICY_LOSSES.register("cispo")
def cispo_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 4.0,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """CISPO: L_t = -sg(min(r_t, 1 + clip_high)) * A_t * log pi_t, r_t = pi_t / pi_old_t.

    The importance weight is clipped and detached; the gradient always flows through log pi, so
    every masked token keeps a gradient (PPO's clip zeroes the gradient of tokens outside the trust
    region, which MiniMax-M1 found drops rare "reflection" tokens). Gradient: -sg(w_t) A_t grad log pi_t.

    Bounds (following MiniMax-M1 and TRL): the weight has an upper bound only, 1 + clip_high.
    MiniMax-M1 sets eps_low "to a large value", i.e. no lower bound, and TRL clamps ``max=`` only;
    verl clips both sides at [1 - clip_low, 1 + clip_high]. So `clip_low` is not used here. TRL's
    absolute cap epsilon_high = 5.0 (ScaleRL's recommendation) is clip_high = 4.0 here.
    `dual_clip` is not used either: the weight is already bounded above.
    The loss value holds log pi itself (the paper's objective), so `policy_loss` is on another
    scale than PPO's (which holds -A * ratio); the gradient is what matters.
    agg: as given; the paper normalises by the batch's token count ("token-mean").
    Metrics: clipfrac (masked tokens whose weight was capped), clipfrac_lower 0, approx_kl (token
    mean of old - new logp), ratio_mean (token mean of the unclipped r).
    """
    log_ratio = _zero_masked(log_probs - old_log_probs, action_mask).clamp(min=-_MAX_LOG_RATIO, max=_MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio.detach())
    weight = ratio.clamp(max=1.0 + clip_high)  # detached: a weight, never a path for the gradient
    advantages = _zero_masked(advantages, action_mask)
    logp = _zero_masked(log_probs, action_mask)
    loss = aggregate_loss(-(weight * advantages) * logp, action_mask, agg, denom)
    metrics = {
        "clipfrac": masked_mean((ratio > 1.0 + clip_high).to(ratio.dtype), action_mask),
        "clipfrac_lower": torch.zeros((), dtype=ratio.dtype, device=ratio.device),
        "approx_kl": masked_mean(-log_ratio, action_mask).detach(),
        "ratio_mean": masked_mean(ratio, action_mask),
    }
    return loss, metrics
