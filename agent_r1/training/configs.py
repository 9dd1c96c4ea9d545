"""Typed configs of the algorithm, the trainer and the SFT warm start."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AlgoConfig:
    adv_estimator: str = "grpo"  # gae | grpo | grpo_no_std | rloo | reinforce_pp | reinforce_pp_baseline
    policy_loss: str = "ppo"  # ppo | vanilla
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    loss_agg: str = "token-mean"  # token-mean | seq-mean-token-mean | seq-mean-token-sum
    gamma: float = 1.0
    lam: float = 1.0
    kl_coef: float = 0.0
    kl_kind: str = "k3"  # k1 | k2 | k3 | abs
    kl_in_reward: bool = False  # True: subtract coef*KL from token rewards; False: add as a loss term
    entropy_coef: float = 0.0
    vf_clip: float | None = 0.2
    critic_lr: float = 1e-3
    # ablation switches from the paper
    loss_mask: bool = True  # False: train on every response token, observations included
    advantage_mask: bool = True  # False: advantages run over every response token


@dataclass
class TrainConfig:
    iterations: int = 40
    prompts_per_iter: int = 16
    ppo_epochs: int = 2
    minibatch_size: int = 64  # trajectories per optimiser step
    lr: float = 3e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    eval_every: int = 10  # 0 = only at the end
    eval_size: int = 100
    out_dir: str = "runs/default"
    init_from: str = ""  # a model folder (e.g. the SFT output); empty = build a fresh model
    threads: int = 2
    log_trajectories_every: int = 10  # sample trajectories to the metrics sink (e.g. an MLflow table)
    max_bad_updates: int = 3  # consecutive non-finite losses before the run stops
    # where and how tensors are computed (agent_r1/training/compute.py)
    device: str = "auto"  # auto (CUDA when visible) | cpu | cuda | cuda:N
    precision: str = "fp32"  # fp32 | bf16 (autocast over float32 master weights and optimiser state)
    micro_batch_size: int = 0  # rows per forward/backward inside a mini-batch (0 = the whole mini-batch)
    # positions per output-head chunk in log-probs: with a 151,936-token vocabulary a chunk of 1,024
    # costs about 3 GiB (logits, softmax, recompute); lower it on small GPUs
    logit_chunk: int = 1024
    lr_schedule: str = "constant"  # constant | linear | cosine (over train.iterations, after the warmup)
    warmup_iterations: int = 0  # linear warmup from 0 to train.lr


@dataclass
class SFTConfig:
    steps: int = 400
    batch_size: int = 32
    lr: float = 2e-3
    guess_fraction: float = 0.6  # demos that answer by a guess instead of searching
    out_dir: str = "runs/sft"
    log_every: int = 50
