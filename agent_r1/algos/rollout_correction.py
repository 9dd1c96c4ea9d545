"""Correcting for an engine that samples from a slightly different distribution than the trainer
scores (`algo.rollout_correction`): synchronous training, where the gap is numerics, not staleness.

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
`algos/offpolicy.py`). When engine and trainer agree, rho = 1 up to float rounding and the update
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
    "rollout correction", key="algo.rollout_correction.mode", where="agent_r1.algos.rollout_correction.CORRECTIONS")
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
