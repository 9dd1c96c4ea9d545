"""Importance weights for tokens the trained policy did not sample itself: the off-policy correction of
asynchronous training (decoupled PPO, `behaviour_weights`) and the rollout correction of synchronous
training (`rollout_correction`, an engine's numerics).

Asynchronous training: decoupled PPO with a truncated behaviour weight.

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

Synchronous training (`algo.rollout_correction`): an engine samples from a slightly different
distribution than the trainer scores, a gap of numerics, not staleness.

vLLM and the trainer compute the same policy with different kernels (and, in bf16, different
rounding), so pi_engine, which sampled the tokens, is not exactly pi_old, which the PPO ratio is
relative to. As verl's rollout correction and TRL's `vllm_importance_sampling_mode`, each token's
loss is weighted by the importance weight rho_t = pi_old / pi_engine (no gradient through it):

- `token_truncate`: w_t = min(rho_t, token_cap) (truncated importance sampling, "TIS");
- `seq_mask`: a trajectory whose geometric-mean ratio exp(mean_t log rho_t) leaves
  [seq_low, seq_high] is rejected (it was sampled by something the trainer does not recognise: a
  stale or broken engine): weight 0 on every token, and, as verl's rejection sampling, it leaves
  the loss mask, so the token-mean normaliser, the entropy bonus and the KL term no longer count
  it (`apply_rollout_correction`); the update is the one of the batch without it. Advantages are
  estimated before the correction, so a group estimator's baseline still sees its score;
- `token_truncate_seq_mask`: both;
- `none` (default): no weight at all.

The weight multiplies the advantage (w >= 0, so the clipped objective scales by it, as in
`behaviour_weights`). When engine and trainer agree, rho = 1 up to float rounding and the update
is unchanged. Metrics: `rollout_corr/weight_mean`, `rollout_corr/truncated_frac`,
`rollout_corr/seq_masked_frac`, `rollout_corr/log_ratio_mean` (an estimate of KL(engine || old)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from agent_r1.algos.masked import masked_mean
from agent_r1.registry import NoTraits, Registry

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


# ---------------------------------------------------------------- synchronous: the engine's numerics

@dataclass
class RolloutCorrectionConfig:
    """`algo.rollout_correction`."""
    mode: str = "none"  # none | token_truncate | seq_mask | token_truncate_seq_mask
    token_cap: float = 2.0  # TIS threshold (verl's and ms-swift's default)
    seq_low: float = 0.5  # geometric-mean ratio bounds of the sequence mask
    seq_high: float = 2.0

    def __post_init__(self) -> None:
        if self.mode != "none" and self.mode not in CORRECTIONS:  # "none" weights nothing: not registered
            raise ValueError(f"algo.rollout_correction.mode={self.mode!r}; choose none or one of "
                             f"{CORRECTIONS.names()}. {CORRECTIONS.how()}")
        # the numbers' ranges are in agent_r1/schema.py's LIMITS (checked with the rest of the config)

    @property
    def enabled(self) -> bool:
        return self.mode != "none"


# (weights [B, T], truncated tokens [B, T], kept rows [B]) from (log rho, sampled mask, config)
Weights = Callable[[torch.Tensor, torch.Tensor, RolloutCorrectionConfig],
                   tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def _truncate(log_rho: torch.Tensor, mask: torch.Tensor, cfg: RolloutCorrectionConfig):
    rho = torch.exp(log_rho.clamp(max=20.0))  # exp(20) is far above any cap: the clamp only avoids inf
    return torch.clamp(rho, max=cfg.token_cap), rho > cfg.token_cap, torch.ones(len(log_rho), dtype=torch.bool)


def _seq_keep(log_rho: torch.Tensor, mask: torch.Tensor, cfg: RolloutCorrectionConfig) -> torch.Tensor:
    n = mask.sum(-1).clamp(min=1)
    geo = torch.exp((log_rho * mask).sum(-1) / n)
    return (geo >= cfg.seq_low) & (geo <= cfg.seq_high)


def _seq_mask(log_rho, mask, cfg):
    keep = _seq_keep(log_rho, mask, cfg)
    return keep.to(log_rho.dtype)[:, None].expand_as(log_rho).clone(), torch.zeros_like(mask, dtype=torch.bool), keep


def _both(log_rho, mask, cfg):
    w, cut, _ = _truncate(log_rho, mask, cfg)
    keep = _seq_keep(log_rho, mask, cfg)
    return w * keep.to(w.dtype)[:, None], cut, keep


#: `algo.rollout_correction.mode` -> its weights (besides "none", which weights nothing)
CORRECTIONS: Registry[Weights, NoTraits] = Registry(
    "rollout correction", key="algo.rollout_correction.mode", where="agent_r1.algos.correction.CORRECTIONS")
CORRECTIONS.register("token_truncate", _truncate)
CORRECTIONS.register("seq_mask", _seq_mask)
CORRECTIONS.register("token_truncate_seq_mask", _both)


def apply_rollout_correction(batch: dict[str, Any], cfg: RolloutCorrectionConfig) -> None:
    """Adds the weights (`offpolicy_weight`) and metrics (`offpolicy_metrics`) to a prepared
    batch and takes the rejected rows out of its `loss_mask`, which the policy loss's normaliser,
    the entropy bonus and the KL term all aggregate over."""
    w, metrics, keep = _correction(batch["old_logp"], batch["sampled_logprobs"], batch["action_mask"], cfg)
    batch["offpolicy_weight"], batch["offpolicy_metrics"] = w, metrics
    if keep is not None and not bool(keep.all()):
        batch["loss_mask"] = batch["loss_mask"] * keep.to(batch["loss_mask"].dtype)[:, None]


def rollout_correction(old_logp: torch.Tensor, engine_logp: torch.Tensor, sampled_mask: torch.Tensor,
                       cfg: RolloutCorrectionConfig) -> tuple[torch.Tensor | None, dict[str, float]]:
    """(weights [B, T] or None for `none`, metrics). Weights are 1 off the sampled tokens (prompt,
    observations, padding: the engine gave no probability there) and carry no gradient."""
    w, metrics, _ = _correction(old_logp, engine_logp, sampled_mask, cfg)
    return w, metrics


def _correction(old_logp: torch.Tensor, engine_logp: torch.Tensor, sampled_mask: torch.Tensor,
                cfg: RolloutCorrectionConfig) -> tuple[torch.Tensor | None, dict[str, float], torch.Tensor | None]:
    """(weights, metrics, kept rows [B] bool); a row without a sampled token is always kept."""
    if cfg.mode == "none":
        return None, {}, None
    fn = CORRECTIONS[cfg.mode]
    sampled = sampled_mask > 0
    mask = sampled.to(old_logp.dtype)
    log_rho = torch.where(sampled, (old_logp - engine_logp).detach(), torch.zeros_like(old_logp))
    w, cut, keep = fn(log_rho, mask, cfg)
    w = torch.where(sampled, w, torch.ones_like(w))
    rows = sampled.any(-1)
    masked_rows = rows & ~keep
    metrics = {
        "rollout_corr/weight_mean": float(masked_mean(w, mask)) if sampled.any() else 1.0,
        "rollout_corr/truncated_frac": float(masked_mean(cut.to(mask.dtype), mask)) if sampled.any() else 0.0,
        "rollout_corr/seq_masked_frac": float(masked_rows.sum() / rows.sum().clamp(min=1)),
        "rollout_corr/log_ratio_mean": float(masked_mean(log_rho, mask)) if sampled.any() else 0.0,
    }
    return w, metrics, keep | ~rows
