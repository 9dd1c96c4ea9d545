"""Policy / value / entropy losses over masked token tensors.

Shapes: token tensors [B, T]; ``action_mask`` 0/1 float [B, T] (1 on the
tokens whose loss counts; the trainer may pass a different mask for the
loss-mask ablation).  Masked tokens contribute nothing to the loss and get an
exactly-zero gradient, even if the inputs hold NaN/inf there.

Every loss returns ``(loss, metrics)``: ``loss`` a differentiable scalar,
``metrics`` a dict of detached scalar tensors (``float(v)`` to log).

Policy losses are chosen by `algo.policy_loss` from `POLICY_LOSSES`: PPO's token-level clip, vanilla
policy gradient, and two beyond them: GSPO (sequence-level ratio and clipping) and CISPO (a clipped,
stop-gradient importance weight on REINFORCE, so no token loses its gradient). Both register in `POLICY_LOSSES` (``algo.policy_loss: gspo | cispo``) with the signature of
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

KL to a reference policy (`KL_PENALTIES`, chosen by `algo.kl_kind`): the estimators take log-probabilities of the *sampled* tokens, [B, T], and
return an element-wise [B, T] estimate of KL(pi || pi_ref) (Schulman's k1/k2/k3).
Reduce with ``agent_r1.algos.aggregate_loss`` / ``masked_mean`` and the
action mask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from agent_r1.registry import NoTraits, Registry

_MAX_LOG_RATIO = 20.0  # exp(20) ~ 5e8: far past any clip, finite in fp32
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")

PolicyLossFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]
# (log_probs, old_log_probs, advantages, action_mask, clip_low, clip_high, dual_clip, agg, denom) -> (loss, metrics)
POLICY_LOSSES: Registry[PolicyLossFn, NoTraits] = Registry(
    "policy loss", key="algo.policy_loss", where="agent_r1.algos.POLICY_LOSSES", plugins="agent_r1.policy_losses")


def _zero_masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x on masked-in tokens, exact 0 elsewhere: garbage (NaN/inf) there can't reach forward or backward."""
    return torch.where(mask > 0, x, torch.zeros_like(x))


def aggregate_loss(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean",
                   denom: float | torch.Tensor | None = None, norm_tokens: int | None = None) -> torch.Tensor:
    """Reduce a per-token loss [B, T] to a scalar.

    "token-mean":              sum over all masked tokens / number of masked tokens.
    "seq-mean-token-mean":     mean over rows of (row token mean).
    "seq-mean-token-sum":      mean over rows of (row token sum).
    "seq-mean-token-sum-norm": mean over rows of (row token sum / L), L a constant length
                               (`norm_tokens`; None = the tensor's width T, as verl's default):
                               Dr. GRPO's normaliser, which no sequence's own length enters.
    Rows with no masked token are excluded from the seq-mean; an empty mask gives 0.

    `denom` replaces the normaliser (masked tokens for token-mean, rows with tokens for the
    seq-mean modes, rows with tokens x L for the -norm mode) by one counted over a larger batch:
    a micro-batch then contributes exactly its share of the mini-batch loss, so accumulated
    gradients equal the one-shot gradient.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation mode {mode!r}; known: {list(AGG_MODES)}")
    if mode == "token-mean":
        if denom is None:
            return masked_mean(loss_mat, mask)
        return masked_sum(loss_mat, mask) / max(float(denom), 1.0)
    if mode == "seq-mean-token-sum-norm":  # one sum over every masked token, one constant normaliser
        n = loss_denominator(mask, mode, norm_tokens) if denom is None else float(denom)
        return masked_sum(loss_mat, mask) / max(n, 1.0)
    row_has_tokens = ((mask > 0).any(dim=-1)).to(loss_mat.dtype)  # [B]
    if mode == "seq-mean-token-mean":
        per_seq = masked_mean(loss_mat, mask, dim=-1)  # [B]
    else:
        per_seq = masked_sum(loss_mat, mask, dim=-1)  # [B]
    n = row_has_tokens.sum().clamp(min=1.0) if denom is None else max(float(denom), 1.0)
    return masked_sum(per_seq, row_has_tokens) / n


def loss_denominator(mask: torch.Tensor, mode: str, norm_tokens: int | None = None) -> float:
    """The normaliser `aggregate_loss` uses for `mask` (count it over a whole mini-batch).

    `norm_tokens`: the constant length L of "seq-mean-token-sum-norm" (None or 0 = the width of `mask`);
    the other modes ignore it."""
    if mode == "token-mean":
        return float((mask > 0).sum())
    rows = float((mask > 0).any(dim=-1).sum())
    if mode == "seq-mean-token-sum-norm":
        return rows * float(norm_tokens or mask.shape[-1])
    return rows


@POLICY_LOSSES.register("ppo")
def ppo_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clipped surrogate (asymmetric clip, optional dual clip) as in verl.

    log_probs (grad), old_log_probs, advantages, action_mask: [B, T].
    ratio = exp(logp - old_logp);  L = max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high)).
    dual_clip = c > 1: for A < 0 the loss is further capped at -A * c.
    Metrics: clipfrac, clipfrac_lower (dual-clip hits), approx_kl (mean old - new logp), ratio_mean.
    """
    log_ratio = _zero_masked(log_probs - old_log_probs, action_mask).clamp(min=-_MAX_LOG_RATIO, max=_MAX_LOG_RATIO)
    advantages = _zero_masked(advantages, action_mask)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = torch.maximum(loss1, loss2)
    clipfrac = masked_mean((loss2 > loss1).to(ratio.dtype), action_mask)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        loss3 = -advantages * dual_clip
        neg = advantages < 0
        pg_losses = torch.where(neg, torch.minimum(clipped, loss3), clipped)
        lower = masked_mean((neg & (clipped > loss3)).to(ratio.dtype), action_mask)
    else:
        pg_losses = clipped
        lower = torch.zeros((), dtype=ratio.dtype, device=ratio.device)
    loss = aggregate_loss(pg_losses, action_mask, agg, denom)
    metrics = {
        "clipfrac": clipfrac.detach(),
        "clipfrac_lower": lower.detach(),
        "approx_kl": masked_mean(-log_ratio, action_mask).detach(),
        "ratio_mean": masked_mean(ratio, action_mask).detach(),
    }
    return loss, metrics


@POLICY_LOSSES.register("vanilla")
def vanilla_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Plain policy gradient L = -A * ratio, no clipping (clip args ignored).

    Same signature as ``ppo_policy_loss``.  On-policy (old = logp.detach()) the
    ratio is 1 and the gradient is the REINFORCE gradient -A * grad(logp).
    """
    log_ratio = _zero_masked(log_probs - old_log_probs, action_mask).clamp(min=-_MAX_LOG_RATIO, max=_MAX_LOG_RATIO)
    advantages = _zero_masked(advantages, action_mask)
    ratio = torch.exp(log_ratio)
    loss = aggregate_loss(-advantages * ratio, action_mask, agg, denom)
    zero = torch.zeros((), dtype=ratio.dtype, device=ratio.device)
    metrics = {
        "clipfrac": zero,
        "clipfrac_lower": zero,
        "approx_kl": masked_mean(-log_ratio, action_mask).detach(),
        "ratio_mean": masked_mean(ratio, action_mask).detach(),
    }
    return loss, metrics


def get_policy_loss(name: str) -> PolicyLossFn:
    """Look up a policy loss by name; unknown name -> ValueError listing known ones."""
    return POLICY_LOSSES[name]


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    action_mask: torch.Tensor,
    clip: float | None = 0.2,
    agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped value loss 0.5 * max((v - R)^2, (v_clip - R)^2) (clip=None: unclipped).

    values (grad), old_values, returns, action_mask: [B, T];
    v_clip = old_v + clamp(v - old_v, -clip, clip).
    Metrics: vf_clipfrac (fraction where the clipped term is the larger), vpred_mean.
    """
    returns = _zero_masked(returns, action_mask)
    values, old_values = _zero_masked(values, action_mask), _zero_masked(old_values, action_mask)
    loss1 = (values - returns).square()
    if clip is None:
        loss_mat = loss1
        clipfrac = torch.zeros((), dtype=values.dtype, device=values.device)
    else:
        v_clip = old_values + torch.clamp(values - old_values, -clip, clip)
        loss2 = (v_clip - returns).square()
        loss_mat = torch.maximum(loss1, loss2)
        clipfrac = masked_mean((loss2 > loss1).to(values.dtype), action_mask)
    loss = 0.5 * aggregate_loss(loss_mat, action_mask, agg, denom)
    metrics = {"vf_clipfrac": clipfrac.detach(), "vpred_mean": masked_mean(values, action_mask).detach()}
    return loss, metrics


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution per position: logits [B, T, V] -> [B, T]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    # 0 * log 0 := 0, NaN-free in forward and backward even for -inf logits (masked vocab)
    logp = torch.where(p > 0, logp, torch.zeros_like(logp))
    return -(p * logp).sum(dim=-1)


def entropy_bonus(logits: torch.Tensor, action_mask: torch.Tensor, agg: str = "token-mean") -> torch.Tensor:
    """Aggregated entropy over action tokens (scalar).  Use as loss = pg_loss - coef * bonus."""
    return aggregate_loss(entropy_from_logits(logits), action_mask, agg)


# ---------------------------------------------------------------- GSPO and CISPO

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


# ---------------------------------------------------------------- KL to the reference policy

KLFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_PENALTIES: Registry[KLFn, NoTraits] = Registry(
    "KL estimator", key="algo.kl_kind", where="agent_r1.algos.KL_PENALTIES", plugins="agent_r1.kl_estimators")


@KL_PENALTIES.register("k1")
@KL_PENALTIES.register("kl")
def _k1(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k1 = logp - ref (unbiased, high variance, can be negative)."""
    return log_probs - ref_log_probs


@KL_PENALTIES.register("abs")
def _abs(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """|logp - ref|."""
    return (log_probs - ref_log_probs).abs()


@KL_PENALTIES.register("k2")
@KL_PENALTIES.register("mse")
def _k2(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k2 = 0.5 * (logp - ref)^2 (verl "mse")."""
    return 0.5 * (log_probs - ref_log_probs).square()


@KL_PENALTIES.register("k3")
@KL_PENALTIES.register("low_var_kl")
def _k3(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """k3 = exp(ref - logp) - (ref - logp) - 1 >= 0 (verl "low_var_kl"), clamped to [0, 10].

    Computed as expm1(x) - x (accurate for small x); the lower clamp 0 only removes
    float rounding below the true minimum (verl clamps at -10, a no-op bound).
    """
    kl = (ref_log_probs - log_probs).clamp(min=-20.0, max=20.0)  # keep exp() finite
    return (torch.expm1(kl) - kl).clamp(min=0.0, max=10.0)


def get_kl_penalty(kind: str) -> KLFn:
    """Look up a KL estimator by name; unknown name -> ValueError listing known ones."""
    return KL_PENALTIES[kind]


def kl_penalty(log_probs: torch.Tensor, ref_log_probs: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Element-wise KL estimate [B, T] of kind "k1" | "k2" | "k3" | "abs" (aliases: kl, mse, low_var_kl)."""
    return get_kl_penalty(kind)(log_probs, ref_log_probs)


# ------------------------------------------ importance weights: asynchronous staleness and rollout correction
# Importance weights for tokens the trained policy did not sample itself: the off-policy correction of
# asynchronous training (decoupled PPO, `behaviour_weights`) and the rollout correction of synchronous
# training (`rollout_correction`, an engine's numerics).
#
# Asynchronous training: decoupled PPO with a truncated behaviour weight.
#
# With bounded staleness (`train.max_staleness` >= 1) a batch may have been sampled by an older
# policy than the one being updated. Three policies are then in play (AReaL's decoupled PPO, Fu et
# al. 2025, "AReaL: a large-scale asynchronous reinforcement learning system for language reasoning"):
#
# - behaviour  pi_behav: the weights that sampled the tokens; its log-probs come from the engine
#   (`Turn.action_logprobs`, collated as `sampled_logprobs`);
# - proximal   pi_prox:  the learner's weights when the update starts; its log-probs are the ones the
#   trainer recomputes (`old_logp`), and the PPO ratio and its clip stay relative to it;
# - current    pi_theta: the weights being optimised.
#
# The per-token objective is
#
#     L_t = w_t * max(-A_t * r_t, -A_t * clip(r_t, 1 - eps_low, 1 + eps_high)),
#     r_t = pi_theta / pi_prox,   w_t = min(pi_prox / pi_behav, C)   (no gradient through w_t)
#
# `w_t` corrects for sampling from pi_behav instead of pi_prox. It is truncated at C
# (`algo.offpolicy_clip`) as in truncated importance sampling (Ionides 2008; verl's rollout
# correction, token-level "TIS"; ms-swift's port of it defaults its threshold to 2.0): a token the stale policy found unlikely but the
# proximal one likes cannot dominate the update. AReaL instead drops tokens whose weight exceeds its
# cap (`behav_imp_weight_cap`); truncation keeps them, with a bounded weight.
#
# Because w_t > 0, weighting the per-token loss by w_t equals multiplying the advantage by w_t
# (max and min commute with a positive scale, the dual clip included), so the trainer feeds
# `w * A` to the unchanged PPO loss (`offpolicy_advantages`).
#
# Synchronous training (`algo.rollout_correction`): an engine samples from a slightly different
# distribution than the trainer scores, a gap of numerics, not staleness.
#
# vLLM and the trainer compute the same policy with different kernels (and, in bf16, different
# rounding), so pi_engine, which sampled the tokens, is not exactly pi_old, which the PPO ratio is
# relative to. As verl's rollout correction and TRL's `vllm_importance_sampling_mode`, each token's
# loss is weighted by the importance weight rho_t = pi_old / pi_engine (no gradient through it):
#
# - `token_truncate`: w_t = min(rho_t, token_cap) (truncated importance sampling, "TIS");
# - `seq_mask`: a trajectory whose geometric-mean ratio exp(mean_t log rho_t) leaves
#   [seq_low, seq_high] is rejected (it was sampled by something the trainer does not recognise: a
#   stale or broken engine): weight 0 on every token, and, as verl's rejection sampling, it leaves
#   the loss mask, so the token-mean normaliser, the entropy bonus and the KL term no longer count
#   it (`apply_rollout_correction`); the update is the one of the batch without it. Advantages are
#   estimated before the correction, so a group estimator's baseline still sees its score;
# - `token_truncate_seq_mask`: both;
# - `none` (default): no weight at all.
#
# The weight multiplies the advantage (w >= 0, so the clipped objective scales by it, as in
# `behaviour_weights`). When engine and trainer agree, rho = 1 up to float rounding and the update
# is unchanged. Metrics: `rollout_corr/weight_mean`, `rollout_corr/truncated_frac`,
# `rollout_corr/seq_masked_frac`, `rollout_corr/log_ratio_mean` (an estimate of KL(engine || old)).

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
    "rollout correction", key="algo.rollout_correction.mode", where="agent_r1.algos.losses.CORRECTIONS")
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


# ---------------------------------------------------------------- masked reductions over token tensors
# Conventions used across ``agent_r1.algos``:
#
# * token tensors are float ``[B, T]`` (batch, sequence);
# * ``mask`` is a 0/1 float tensor of the same shape, 1 on the tokens that take
#   part (for RL: the *action* tokens the policy generated, 0 on prompt, tool
#   observation and padding tokens);
# * positions where ``mask == 0`` never influence a result, even if ``x`` holds
#   NaN/inf there (we select with ``torch.where`` rather than multiply), and they
#   receive an exactly-zero gradient;
# * an empty mask never produces NaN: sums are 0, means are 0, variances are 0.



def _select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x * mask where mask > 0, exact 0 elsewhere (NaN-safe, zero gradient)."""
    mask = mask.to(x.dtype)
    return torch.where(mask > 0, x * mask, torch.zeros_like(x))


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of ``x`` over masked entries.

    x, mask: [B, T].  dim=None -> scalar; dim=d -> reduced over d (e.g. [B] for dim=-1).
    """
    sel = _select(x, mask)
    return sel.sum() if dim is None else sel.sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` over masked entries; 0 where the mask is empty.

    x, mask: [B, T].  dim=None -> scalar; dim=d -> reduced over d.
    """
    total = masked_sum(x, mask, dim)
    count = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim=dim)
    return total / count.clamp(min=1.0)  # empty -> 0 / 1 = 0


def masked_var(x: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of ``x`` over *all* masked entries of the batch -> scalar.

    ``unbiased`` applies Bessel's correction n / (n - 1) (as verl's ``masked_var``).
    With fewer than two masked entries the variance is defined as 0 (no NaN).
    """
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    if unbiased:
        n = mask.to(x.dtype).sum()
        var = var * torch.where(n > 1, n / (n - 1).clamp(min=1.0), torch.zeros_like(n))
    return var


def masked_whiten(
    x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Whiten ``x`` with the mean / unbiased std of its masked entries -> [B, T].

    out = (x - mean) / sqrt(var + eps) on masked entries, 0 elsewhere.
    ``shift_mean=False`` adds the mean back (rescale only, as in verl).
    Rows with an all-zero mask (padding) never enter mean/var.
    """
    mean = masked_mean(x, mask)
    var = masked_var(x, mask, unbiased=True)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return _select(out, (mask > 0).to(x.dtype))
