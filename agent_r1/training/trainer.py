"""The in-process RL trainer: rollout -> rewards -> reference/old log-probs -> advantages ->
PPO epochs over mini-batches -> metrics, with atomic checkpoints and exact resume. One iteration
reads top to bottom here: `RLTrainer.train_step`, then the pieces it calls (prompt order, dynamic
sampling, zero-advantage skipping, metrics) and the loop over iterations (`fit_loop`), which the
Ray trainer drives too. The math it calls is in algos/ (advantages.py, losses.py); the forward
passes and the optimiser in compute.py.

This is the reference implementation; the Ray layer distributes the same steps.
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from agent_r1.agents.assemble import agent_metrics
from agent_r1.algos import (
    AdvantageInputs,
    aggregate_loss,
    get_policy_loss,
    kl_penalty,
    loss_denominator,
    needs_critic,
    value_loss,
)
from agent_r1.algos.advantages import estimator_over_sessions, informative, split_groups
from agent_r1.algos.losses import apply_rollout_correction, behaviour_weights, offpolicy_advantages
from agent_r1.algos.schedules import make_scheduler
from agent_r1.closing import close_all
from agent_r1.config import ExperimentConfig
from agent_r1.evaluation.agent_eval import evaluate_policy, trajectory_stats
from agent_r1.models.lora import apply_lora, has_adapters, reference_context
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engines import EngineWeights, build_engine, options_from_config
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import check_trainable_sampling
from agent_r1.tools.runner import tool_metrics
from agent_r1.training import checkpoint as ckpt
from agent_r1.training.checkpoint import DiskFullError, is_disk_full
from agent_r1.training.compute import (Compute, ValueModel, has_dropout, master_dtype, pad_micro_batch, place_frozen,
                                       place_policy, token_logprobs)
from agent_r1.training.distributed import LocalGroup
from agent_r1.tracking.metrics import MetricsSink
from agent_r1.trajectory import Trajectory, collate


class NonFiniteLossError(RuntimeError):
    pass


class RLTrainer:
    def __init__(self, cfg: ExperimentConfig, model: Any, tokenizer: Any, make_env: Any,
                 train_samples: list[dict[str, Any]], eval_samples: list[dict[str, Any]] | None = None,
                 sink: MetricsSink | None = None, reference: Any | None = None,
                 engine: str = ""):  # the generation engine's name ("" = rollout.engine)
        check_trainable_sampling(cfg.rollout)
        self.compute = Compute.from_config(cfg)
        if cfg.model.lora.enabled and not has_adapters(model):
            model = apply_lora(model, cfg.model.lora)
        model = place_policy(model, self.compute, cfg.model.gradient_checkpointing)
        self.cfg, self.model, self.tokenizer, self.make_env = cfg, model, tokenizer, make_env
        self.eval_samples = eval_samples or []
        self.out_dir = Path(cfg.train.out_dir)
        self.codec = ChatCodec(tokenizer)
        self.engine = build_engine(engine or cfg.rollout.engine, model, tokenizer,
                                   options_from_config(cfg, str(self.compute.device), self.compute.precision))
        self.engine_weights = EngineWeights(self.engine, model)  # vLLM: its own copy, synced after updates
        self.sampler = PromptSampler(train_samples, cfg.seed)
        self.sink = sink
        self.dp = LocalGroup()  # one learner; distributed.join makes this trainer one rank of several
        self.defer_old_logp = True  # learn(): old log-probs from the first mini-batch's forward, where exact
        self._dropout = has_dropout(model)  # train and eval forwards differ: never deferred
        self.iteration = 0
        self.bad_updates = 0  # consecutive non-finite updates (stops the run at the limit)
        self.skipped_updates = 0  # all non-finite updates so far (a metric)
        a = cfg.algo
        self.estimator = estimator_over_sessions(a.adv_estimator)  # an agent session's steps count once
        self.policy_loss = get_policy_loss(a.policy_loss)
        self.norm_tokens = a.loss_norm_tokens or cfg.rollout.max_total_tokens  # seq-mean-token-sum-norm's length
        # LoRA: the reference is the policy with its adapters off (one copy of the base weights)
        self.ref_in_policy = a.kl_coef > 0 and has_adapters(model)
        self.reference = None
        if a.kl_coef > 0 and not self.ref_in_policy:
            self.reference = place_frozen(reference if reference is not None else copy.deepcopy(model), self.compute,
                                          master_dtype(model))
        self.critic = (ValueModel(model).to(self.compute.device) if needs_critic(a.adv_estimator) else None)
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.train.lr,
                                           weight_decay=cfg.train.weight_decay)
        self.scheduler = make_scheduler(self.optimizer, cfg.train)
        self.critic_optimizer = (torch.optim.AdamW([p for p in self.critic.parameters() if p.requires_grad],
                                                   lr=a.critic_lr)
                                 if self.critic is not None else None)

    # --- one iteration ------------------------------------------------------------------
    def rollout(self, round: int = 0) -> list[Trajectory]:
        """The next `train.prompts_per_iter` prompts, rolled out; `round` > 0: dynamic sampling's extras."""
        samples = self.sampler.next_batch(self.cfg.train.prompts_per_iter)
        with self.compute.autocast():
            return run_rollout(self.engine_weights.current(), self.codec, self.make_env, samples, self.cfg.rollout,
                               self.cfg.reward, seed=rollout_seed(self.cfg.seed, self.iteration, round=round))

    @torch.no_grad()
    def _per_token(self, fn: Any, model: Any, batch: dict[str, Any]) -> torch.Tensor:
        """`fn(model, micro_batch) -> [rows, width]` over micro-batches, gathered into `[B, T]` on the CPU."""
        model.eval()
        out = torch.zeros_like(batch["attention_mask"])
        with self.compute.autocast():
            for rows, mb in self.dp.micro_batches(self.compute, batch):
                values = fn(model, mb).float().cpu()  # a padding micro-batch (no rows) runs for its collectives
                if len(rows):
                    out[rows, :values.shape[1]] = values
        return self.dp.gather_rows(out)

    def _reference(self) -> contextlib.AbstractContextManager:
        return reference_context(self.model) if self.ref_in_policy else contextlib.nullcontext(self.reference)

    def _logprobs(self, model: Any, mb: dict[str, torch.Tensor]) -> torch.Tensor:
        return token_logprobs(model, mb["input_ids"], mb["attention_mask"], self.compute.temperature,
                              positions=mb["logp_mask"], chunk=self.compute.logit_chunk)[0]

    def prepare(self, trajs: list[Trajectory], defer_old_logp: bool = False) -> dict[str, Any]:
        """Collates, computes old/ref log-probs, values, and advantages (no gradients). With
        `defer_old_logp` the old log-probs are left to the first mini-batch's forward (see `learn`)."""
        a = self.cfg.algo
        batch = collate(trajs, self.tokenizer.pad_token_id)
        batch["loss_mask"] = batch["action_mask"] if a.loss_mask else batch["response_mask"]
        adv_mask = batch["action_mask"] if a.advantage_mask else batch["response_mask"]
        batch["adv_mask"] = adv_mask
        batch["logp_mask"] = torch.maximum(batch["loss_mask"], adv_mask)  # where any term needs a log-prob
        if not defer_old_logp:
            batch["old_logp"] = self._per_token(self._logprobs, self.model, batch)
        rewards, scores = batch["token_rewards"].clone(), batch["scores"].clone()
        if self.reference is not None or self.ref_in_policy:
            with self._reference() as reference:
                batch["ref_logp"] = self._per_token(self._logprobs, reference, batch)
            if a.kl_in_reward:
                kl = kl_penalty(batch["old_logp"], batch["ref_logp"], a.kl_kind) * adv_mask
                rewards = rewards - a.kl_coef * kl
                # group estimators read one score per trajectory: the KL enters it as its sum (as verl)
                scores = scores - a.kl_coef * kl.sum(-1)
        values = None
        if self.critic is not None:
            values = self._per_token(lambda m, mb: m(mb["input_ids"], mb["attention_mask"]), self.critic, batch)
            values = values * adv_mask
            batch["old_values"] = values
        out = self.estimator(AdvantageInputs(token_rewards=rewards, scores=scores, action_mask=adv_mask,
                                             group_ids=batch["group_ids"], values=values, gamma=a.gamma, lam=a.lam,
                                             turn_index=batch.pop("turn_index"), gigpo=a.gigpo,
                                             context_keys=batch.pop("context_keys"),  # turns: "gigpo"
                                             session_ids=batch.pop("session_ids")))
        batch["advantages"], batch["returns"] = out.advantages, out.returns
        if self.cfg.train.max_staleness > 0:  # asynchronous: decoupled PPO (algos/losses.py)
            batch["offpolicy_weight"], batch["offpolicy_metrics"] = behaviour_weights(
                batch["old_logp"], batch["sampled_logprobs"], batch["action_mask"], a.offpolicy_clip)
        elif a.rollout_correction.enabled:  # synchronous: the engine's numerics (algos/losses.py)
            apply_rollout_correction(batch, a.rollout_correction)  # rejected rows leave loss_mask
        return batch

    def update(self, batch: dict[str, Any]) -> dict[str, float]:
        t = self.cfg.train
        n = batch["input_ids"].shape[0]
        stats: dict[str, list[float]] = {}
        for epoch in range(t.ppo_epochs):
            gen = torch.Generator().manual_seed(self.cfg.seed * 7919 + self.iteration * 101 + epoch)
            order = torch.randperm(n, generator=gen)
            for start in range(0, n, t.minibatch_size):
                self._step_minibatch(batch, order[start:start + t.minibatch_size], stats)
        return {k: sum(v) / len(v) for k, v in stats.items() if v}

    def _step_minibatch(self, batch: dict[str, Any], idx: torch.Tensor, stats: dict[str, list[float]]) -> None:
        """One optimiser step over rows `idx` (gradients accumulated over micro-batches)."""
        t = self.cfg.train
        self.optimizer.zero_grad(set_to_none=True)
        record, lost = self._backward_minibatch(batch, idx)
        record = self.dp.sync_policy(self, record)  # None on every rank when any rank cannot step
        if lost:  # counted after every rank's collectives: a raise here leaves no rank waiting
            self._bad_update(lost)
        if record is None:
            return
        grad_norm = self.dp.clip_grad_norm([p for p in self.model.parameters() if p.requires_grad], t.max_grad_norm)
        if not torch.isfinite(grad_norm):
            self._bad_update(f"gradient norm is {float(grad_norm)}")
            return
        self.optimizer.step()
        self.bad_updates = 0
        record["grad_norm"] = float(grad_norm)
        if self.critic is not None:
            record.update(self._step_critic(batch, idx))
        for k, v in record.items():
            stats.setdefault(k, []).append(v)

    def _backward_minibatch(self, batch: dict[str, Any], idx: torch.Tensor) -> tuple[dict[str, float] | None, str]:
        """Policy-loss gradients of rows `idx` into `.grad`, one micro-batch at a time. Each
        micro-batch's loss is normalised by the whole mini-batch's token (or sequence) count, so the
        accumulated gradient equals the one-shot mini-batch gradient. Returns (record, why the step
        is lost): record None = nothing to step on; why = a non-finite loss on this rank."""
        a = self.cfg.algo
        denom = loss_denominator(batch["loss_mask"][idx], a.loss_agg, self.norm_tokens)
        if denom == 0:  # nothing to train on (e.g. every action truncated and masked): no step at all
            return None, ""
        # algo.skip_zero_advantage: rows whose policy-loss gradient is exactly 0 skip forward/backward
        rows = trained_rows(batch["advantages"], batch["loss_mask"], idx) if a.skip_zero_advantage else idx
        self.model.train()
        record: dict[str, float] = {}
        micro = 0
        bad = ""  # why this mini-batch cannot step (a non-finite loss)
        fill = None if "old_logp" in batch else torch.zeros_like(batch["attention_mask"])
        for mb_rows, mb in self.dp.micro_batches(self.compute, batch, rows):  # this rank's share of the rows
            mask = mb["loss_mask"]
            with self.compute.autocast():
                logp, entropy = token_logprobs(self.model, mb["input_ids"], mb["attention_mask"],
                                               self.compute.temperature, positions=mb["logp_mask"], with_entropy=True,
                                               entropy_grad=a.entropy_coef != 0, chunk=self.compute.logit_chunk)
            if not len(mb_rows) or bad:  # padding (another rank has more micro-batches), or a step already lost
                self._zero_backward(logp, batch)
                continue
            advantages = offpolicy_advantages(mb["advantages"], mb.get("offpolicy_weight"))
            old_logp = mb["old_logp"] if fill is None else logp.detach()  # deferred: this forward is the pass
            if fill is not None:
                fill[mb_rows, :old_logp.shape[1]] = old_logp.float().cpu()
            pg_loss, pg_metrics = self.policy_loss(logp, old_logp, advantages, mask,
                                                   clip_low=a.clip_low, clip_high=a.clip_high,
                                                   dual_clip=a.dual_clip, agg=a.loss_agg, denom=denom)
            ent = aggregate_loss(entropy, mask, a.loss_agg, denom)
            loss = pg_loss - a.entropy_coef * ent
            kl_value = torch.zeros(())
            if "ref_logp" in mb:
                kl_value = aggregate_loss(kl_penalty(logp, mb["ref_logp"], a.kl_kind), mask, a.loss_agg, denom)
                if not a.kl_in_reward:
                    loss = loss + a.kl_coef * kl_value
            if not torch.isfinite(loss):
                bad = f"policy loss is {loss.item()}"
                if self.dp.world == 1:
                    break
                self._zero_backward(logp, batch)  # the other ranks' passes still need this rank's
                continue
            if loss.requires_grad:
                loss.backward()
            else:  # a micro-batch without a log-prob position has no graph
                self._zero_backward(logp, batch)
            micro += 1
            for k, v in {"policy_loss": pg_loss, "entropy": ent, "kl": kl_value}.items():
                record[k] = record.get(k, 0.0) + float(v.detach())  # shares of the mini-batch value: they add up
            for k, v in pg_metrics.items():
                record[k] = record.get(k, 0.0) + float(v)
        if bad:
            return None, bad
        for k in ("clipfrac", "clipfrac_lower", "approx_kl", "ratio_mean"):
            if k in record:
                record[k] /= max(micro, 1)  # per-micro-batch means: averaged
        if a.skip_zero_advantage:
            finish_skipped(record, self.model.parameters(), batch["loss_mask"], idx, rows, a.loss_agg)
        if fill is not None:  # only rows that ran have old log-probs (skipped rows never need them)
            batch["old_logp"], batch["old_logp_rows"] = fill, torch.zeros(len(fill), dtype=torch.bool)
            batch["old_logp_rows"][rows] = True
        return record, ""

    def _zero_backward(self, logp: torch.Tensor, batch: dict[str, Any]) -> None:
        """A backward that adds nothing, for ranks that must match another rank's pass (with FSDP
        a backward is a collective). One learner has no other rank: nothing to do."""
        if self.dp.world == 1:
            return
        if not logp.requires_grad:  # no log-prob position, so no graph: a padding micro-batch's instead
            mb = pad_micro_batch(self.compute, batch)
            with self.compute.autocast():
                logp = token_logprobs(self.model, mb["input_ids"], mb["attention_mask"], self.compute.temperature,
                                      positions=mb["logp_mask"], chunk=self.compute.logit_chunk)[0]
        (logp.sum() * 0.0).backward()

    def _step_critic(self, batch: dict[str, Any], idx: torch.Tensor) -> dict[str, float]:
        a, t = self.cfg.algo, self.cfg.train
        denom = loss_denominator(batch["adv_mask"][idx], a.loss_agg, self.norm_tokens)
        if denom == 0:
            return {}
        self.critic.train()
        self.critic_optimizer.zero_grad(set_to_none=True)
        record: dict[str, float] = {"value_loss": 0.0}
        for rows, mb in self.dp.micro_batches(self.compute, batch, idx):
            if not len(rows):  # padding: the critic is a replica on every rank, its passes are not collectives
                continue
            with self.compute.autocast():
                values = self.critic(mb["input_ids"], mb["attention_mask"])
            vloss, vmetrics = value_loss(values, mb["old_values"], mb["returns"], mb["adv_mask"], a.vf_clip,
                                         a.loss_agg, denom)
            if vloss.requires_grad:
                vloss.backward()
            record["value_loss"] += float(vloss.detach())
            record.update({k: float(v) for k, v in vmetrics.items()})
        record = self.dp.sync_critic(list(self.critic.parameters()), record)
        self.dp.clip_grad_norm(self.critic.parameters(), t.max_grad_norm)
        self.critic_optimizer.step()
        return record

    def _bad_update(self, why: str) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.bad_updates += 1
        self.skipped_updates += 1
        if self.bad_updates >= self.cfg.train.max_bad_updates:
            raise NonFiniteLossError(f"{why} in {self.bad_updates} consecutive updates at iteration "
                                     f"{self.iteration}; lower train.lr or check the data")

    def train_step(self) -> dict[str, float]:
        t0 = time.perf_counter()
        trajs, dynamic = fill_batch(self.cfg, self.rollout(), self.rollout)  # algo.dynamic_sampling
        return {**self.learn(trajs, time.perf_counter() - t0), **dynamic}

    def learn(self, trajs: list[Trajectory], rollout_s: float) -> dict[str, float]:
        """The learner's half of an iteration: prepare + update on trajectories rolled out
        elsewhere (here, or by Ray rollout workers); advances the iteration."""
        t1 = time.perf_counter()
        batch = self.prepare(trajs, defer_old_logp=self._can_defer_old_logp(len(trajs)))
        update_metrics = {"lr": self.optimizer.param_groups[0]["lr"], **self.update(batch)}
        if "old_logp" not in batch:  # every step was non-finite: no step, the weights are still the old ones
            batch["old_logp"] = self._per_token(self._logprobs, self.model, batch)
        self.scheduler.step()
        self.engine_weights.mark_stale()
        t2 = time.perf_counter()
        self.iteration += 1
        self.last_trajectories = trajs
        every = self.cfg.train.log_trajectories_every
        if every and self.iteration % every == 0 and hasattr(self.sink, "log_trajectories"):
            self.sink.log_trajectories(self.iteration, trajs, self.tokenizer)
        return self._metrics(trajs, batch, update_metrics, rollout_s, t2 - t1)

    def _can_defer_old_logp(self, rows: int) -> bool:
        """Whether the old-log-prob pass can be the first mini-batch's own forward (one no-grad
        forward saved, as TRL does at num_iterations 1): it must cover every row and run before any
        optimiser step (one mini-batch per epoch), on one learner, with nothing in `prepare` reading
        the old log-probs (a KL in the reward, the asynchronous behaviour weights, a rollout correction),
        and without dropout: the training forward would drop out, the old-log-prob pass (like the engine) does not."""
        a, t = self.cfg.algo, self.cfg.train
        kl_reads = ((a.kl_in_reward and (self.reference is not None or self.ref_in_policy))
                    or a.rollout_correction.enabled)
        return (self.defer_old_logp and t.minibatch_size >= rows and not kl_reads and t.max_staleness == 0
                and self.dp.world == 1 and not self._dropout)

    def _metrics(self, trajs, batch, upd, rollout_s, update_s) -> dict[str, float]:
        return iteration_metrics(trajs, batch, upd, rollout_s, update_s, self.cfg.train.ppo_epochs,
                                 self.skipped_updates, engine=self.engine_weights.metrics())

    # --- evaluation, checkpoints, the loop ---------------------------------------------------
    def evaluate(self, greedy: bool = True) -> dict[str, float]:
        samples = self.eval_samples[: self.cfg.train.eval_size]
        if not samples:
            return {}
        with self.compute.autocast():
            return evaluate_policy(self.engine_weights.current(), self.codec, self.make_env, samples, self.cfg.rollout, self.cfg.reward,
                                   greedy=greedy, seed=self.cfg.seed)

    def state_dict(self) -> dict[str, Any]:
        state = {"optimizer": self.optimizer.state_dict(), "sampler": self.sampler.state_dict(),
                 "scheduler": self.scheduler.state_dict(), "bad_updates": self.bad_updates,
                 "skipped_updates": self.skipped_updates}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        return state

    def save(self) -> Path:
        return ckpt.save_checkpoint(self.out_dir / "checkpoints", self.iteration, self.model, self.tokenizer,
                                    self.state_dict(), keep=self.cfg.train.keep_checkpoints)

    def load(self, path: Path) -> None:
        """Restores everything but the policy weights (loaded by the caller from `path`)."""
        state = ckpt.load_state(path)
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampler.load_state_dict(state["sampler"])
        self.bad_updates = state.get("bad_updates", 0)
        self.skipped_updates = state.get("skipped_updates", 0)
        if "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.critic is not None and "critic" in state:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        ckpt.set_rng_state(state["rng"])
        self.iteration = int(state["iteration"])

    def fit(self, on_iteration: Any = None) -> dict[str, float]:
        return fit_loop(self, on_iteration)

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        log_finite(self.sink, step, metrics)

    def close(self) -> None:
        """Stops the generation engine (vLLM's engine-core process and its weight folder); the
        transformers engine holds nothing to stop. The run calls it when training ends or fails."""
        close_all(self.engine, self.make_env)  # the env factory: its MCP servers' connections


# ---------------------------------------------------------------- the prompt order
# A fresh permutation per epoch from (seed, epoch). The position (epoch, offset) is all the state
# there is, so a resumed run draws exactly the prompts the uninterrupted run would have drawn.

@dataclass
class PromptSampler:
    samples: list[dict[str, Any]]
    seed: int
    epoch: int = 0
    offset: int = 0

    def _order(self, epoch: int) -> list[int]:
        order = list(range(len(self.samples)))
        random.Random(self.seed * 100_003 + epoch).shuffle(order)
        return order

    def next_batch(self, n: int) -> list[dict[str, Any]]:
        if not self.samples:
            raise ValueError("no training samples: check data.dir and data.train_file")
        out = []
        while len(out) < n:
            order = self._order(self.epoch)
            take = order[self.offset: self.offset + (n - len(out))]
            out.extend(self.samples[i] for i in take)
            self.offset += len(take)
            if self.offset >= len(order):
                self.epoch, self.offset = self.epoch + 1, 0
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.offset = int(state["epoch"]), int(state["offset"])


# ----------------------------------------- dynamic sampling: fill the batch with groups that carry a gradient
# `algo.dynamic_sampling`: DAPO's dynamic sampling (Yu et al. 2025, section 3.2).
#
# A group whose trajectories all scored the same has advantage 0 under every group estimator (GRPO,
# RLOO, ...): it adds nothing to the policy gradient, yet it counts in the batch, so the batch the
# update learns from shrinks as the policy gets good (or stays bad) on a prompt. Dynamic sampling drops
# such groups and rolls out more prompts until the batch holds `train.prompts_per_iter` groups that
# do carry a gradient:
#
# 1. round 0 is the iteration's own rollout (`train.prompts_per_iter` prompts, the usual seed);
# 2. groups whose metric (`score`: outcome + process rewards, what the estimators read; or `outcome`)
#    is equal on every session are dropped (a group is one prompt's `rollout.n_samples` sessions; an
#    agent session split into steps counts once, with its last step's value: algos/advantages.py);
# 3. while fewer than `train.prompts_per_iter` groups are kept and fewer than
#    `algo.dynamic_sampling.max_extra_rounds` extra rounds were rolled out, another
#    `train.prompts_per_iter` prompts are drawn from the same sampler (so a checkpoint's sampler
#    position covers them, and a resumed run draws what the uninterrupted one did) and rolled out with
#    the seed of (seed, iteration, shard, round): a full batch per round, as verl's recipe does;
# 4. the kept groups, in rollout order, are trimmed to exactly `train.prompts_per_iter`;
# 5. if the cap is reached with fewer, the update learns from what was kept; if no group survived at
#    all, it learns from round 0's batch as it came (`dynamic/fallback` = 1): under a group estimator
#    its advantages are all 0, so the policy loss adds no gradient and the update is what it would
#    have been without dynamic sampling (the iteration, the LR schedule, checkpoints and asynchronous
#    versions all advance as usual, which skipping the update would not do).
#
# The same `fill_batch` serves the in-process trainer and the Ray driver (synchronous and
# asynchronous: there round 0 is the batch popped from the in-flight queue, sampled by an older
# policy, and extra rounds are rolled out with the learner's current weights; each trajectory keeps
# its own `policy_version`, so the decoupled-PPO correction treats each at its own staleness).
#
# Metrics: `dynamic/rounds` (1 = no extra round), `dynamic/prompts_sampled`, `dynamic/groups_kept`
# (the groups trained on), `dynamic/groups_dropped` (all-equal groups over every round),
# `dynamic/groups_trimmed` (kept beyond the batch and left out), `dynamic/fallback`. The usual rollout
# metrics (reward_mean, groups_all_equal, ...) describe the trained batch; an agent run's `agent/*`
# counts (calls, drift, sessions, empty, ...) describe every session rolled out, over every round.
#
# How it differs from `algo.skip_zero_advantage`: that one keeps the batch as sampled and only
# skips the forward/backward of rows whose gradient is 0 (a speed-up, same update); dynamic sampling
# changes what is learned from, replacing those groups with informative ones (more rollouts, a
# fuller gradient).

def fill_batch(cfg: Any, first: list[Trajectory],
               more: Callable[[int], list[Trajectory]]) -> tuple[list[Trajectory], dict[str, float]]:
    """The trajectories to learn from and the `dynamic/*` metrics. `first`: round 0, the iteration's
    own rollout; `more(round)` draws `train.prompts_per_iter` prompts from the run's sampler and
    rolls them out with round `round`'s seed. Off (`algo.dynamic_sampling.enabled` false): `first`
    as it is, no metrics."""
    ds = cfg.algo.dynamic_sampling
    if not ds.enabled:
        return first, {}
    target, n = cfg.train.prompts_per_iter, cfg.rollout.n_samples
    kept: list[list[Trajectory]] = []
    dropped = sampled = 0
    batch, rounds = first, 0
    rolled_out: list[Trajectory] = []
    while True:
        rolled_out += batch
        groups = split_groups(batch, n)
        sampled += len(groups)
        for g in groups:
            if informative(g, ds.metric):
                kept.append(g)
            else:
                dropped += 1
        rounds += 1
        if len(kept) >= target or rounds > ds.max_extra_rounds:
            break
        batch = more(rounds)
    trimmed = max(len(kept) - target, 0)
    kept = kept[:target]
    metrics = {"dynamic/rounds": float(rounds), "dynamic/prompts_sampled": float(sampled),
               "dynamic/groups_kept": float(len(kept)), "dynamic/groups_dropped": float(dropped),
               "dynamic/groups_trimmed": float(trimmed), "dynamic/fallback": float(not kept),
               # agent sessions' counts (agent/*) over every session rolled out, dropped groups too: the
               # kept groups' steps alone would hide their drift and lose the rollout's empty-session count
               **agent_metrics(rolled_out)}
    if not kept:  # no group carries a gradient: learn from the iteration's own batch (see the module doc)
        return first, metrics
    return [t for g in kept for t in g], metrics


# ------------------------------------------------------------- rows whose gradient is 0 skip forward/backward
# `algo.skip_zero_advantage`. A row whose advantages are 0 on every loss-mask token adds exactly 0 to
# the clipped (or vanilla) policy loss and to its gradient: each token's term is -A * ratio (or -A *
# clip(ratio), or -A * c) with A = 0, and the log-ratio is clamped, so the product is 0 in forward and
# backward. In GRPO every row of a group whose rewards are all equal is such a row, which early in
# training (or on a hard task) is most of the batch. Skipping them leaves the update as it was:
#
# - the normaliser: `loss_denominator` is counted over every row of the mini-batch before the
#   skipped rows are taken out, so each trained row's share of the loss is what it was (token-mean
#   and both seq-mean modes);
# - the optimiser step: a mini-batch whose rows are all skipped still steps, on zero gradients
#   (AdamW's moments decay and weight decay applies, as after a backward of zeros);
# - entropy bonus and KL loss terms are not 0 on such rows, so the config refuses the option unless
#   `algo.entropy_coef` is 0 and `algo.kl_coef` is 0 or `algo.kl_in_reward` is true (then the KL
#   sits inside the advantages and the loss has no KL term);
# - metrics: `policy_loss` is unchanged (the skipped shares were 0); the `entropy` and `kl` metrics
#   become means over the trained rows (rescaled by the full / trained normaliser); `clipfrac`,
#   `approx_kl` and `ratio_mean` are means over the trained rows' micro-batches;
#   `skipped_rows_fraction` records the share of rows left out;
# - numerics: the trained rows run in other micro-batch compositions, so the gradient equals the
#   unskipped one to float rounding, not bit for bit.
#
# The critic (GAE) is trained on every row as before: its value loss does not vanish with the advantage.

def trained_rows(advantages: torch.Tensor, loss_mask: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The rows of `idx` (1-D row indices into `[B, T]` tensors) with a non-zero advantage on at
    least one loss-mask token, in `idx` order. NaN counts as non-zero, so it still reaches the
    non-finite-loss check."""
    adv, mask = advantages[idx], loss_mask[idx] > 0
    return idx[((adv != 0) & mask).any(dim=-1)]


def finish_skipped(record: dict[str, float], params: Iterable[torch.nn.Parameter], loss_mask: torch.Tensor,
                   idx: torch.Tensor, rows: torch.Tensor, agg: str) -> dict[str, float]:
    """After the backward of `rows` (a subset of the mini-batch `idx`): zero gradients when no row
    ran (so the optimiser still steps, as on a batch of zeros), the entropy / kl metrics as means
    over the trained rows, and the skipped share."""
    if len(rows) == 0:
        for p in params:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
        record.setdefault("policy_loss", 0.0)
    else:
        # full / trained normaliser, both counted here: seq-mean-token-sum-norm's constant length cancels
        full, trained = loss_denominator(loss_mask[idx], agg), loss_denominator(loss_mask[rows], agg)
        for k in ("entropy", "kl"):
            if k in record and trained > 0:
                record[k] *= full / trained
    record["skipped_rows_fraction"] = 1.0 - len(rows) / max(len(idx), 1)
    return record


# ---------------------------------------------------------------- one iteration's metrics
# From its trajectories, its batch and its update (`RLTrainer.learn`).

def iteration_metrics(trajs: list[Trajectory], batch: dict[str, Any], upd: dict[str, float], rollout_s: float,
                      update_s: float, ppo_epochs: int, skipped_updates: int,
                      engine: dict[str, float] | None = None) -> dict[str, float]:
    """The metrics of one iteration: rewards, trajectory shape, throughput, engine-vs-trainer drift,
    the update's own (`upd`), the engine's (`engine`: weight syncs), the off-policy and tool metrics."""
    scores = batch["scores"]
    groups: dict[str, list[float]] = {}
    for gid, s in zip(batch["group_ids"], scores.tolist()):
        groups.setdefault(gid, []).append(s)
    stats = trajectory_stats(trajs)
    reasons = Counter(t.stop_reason for t in trajs)
    sampled = int(batch["action_mask"].sum())
    # engine vs trainer log-probs of the sampled tokens: any drift (temperature, precision,
    # KV reuse, another engine) between the policy that sampled and the one trained shows here
    act = batch["action_mask"] > 0
    if "old_logp_rows" in batch:  # deferred old log-probs exist for the rows that were trained
        act = act & batch["old_logp_rows"][:, None]
    drift = (batch["sampled_logprobs"] - batch["old_logp"]).abs()[act]
    m = {
        "reward_mean": float(scores.mean()), "reward_std": float(scores.std()) if len(scores) > 1 else 0.0,
        "em": stats["em"], "f1": stats["f1"], "search_first_rate": stats["search_first_rate"],
        "turns_per_trajectory": stats["mean_turns"], "tool_calls_per_trajectory": stats["tool_calls_per_question"],
        "valid_call_rate": stats["valid_call_rate"],
        "response_length": float(batch["response_mask"].sum(-1).mean()),
        "action_tokens": float(batch["action_mask"].sum(-1).mean()),
        "groups_all_equal": sum(max(v) == min(v) for v in groups.values()) / max(len(groups), 1),
        "rollout_tokens_per_s": sampled / max(rollout_s, 1e-9),
        "update_tokens_per_s": ppo_epochs * float(batch["attention_mask"].sum()) / max(update_s, 1e-9),
        "rollout_s": rollout_s, "update_s": update_s,
        "skipped_updates": float(skipped_updates),
        "truncated_actions": float(sum(t.truncated for tr in trajs for t in tr.turns)),
        "truncated_observations": float(sum(t.observation_truncated for tr in trajs for t in tr.turns)),
        "masked_truncated_turns": float(sum(t.masked for tr in trajs for t in tr.turns)),
        "rollout/logprob_diff_max": float(drift.max()) if drift.numel() else 0.0,
        "rollout/logprob_diff_mean": float(drift.mean()) if drift.numel() else 0.0,
        **{f"stop/{k}": float(v) for k, v in reasons.items()},
    }
    shaped = [t.metrics["overlong_penalty"] for t in trajs if "overlong_penalty" in t.metrics]
    if shaped:  # reward.overlong_buffer: DAPO's soft overlong punishment (rewards/scoring.py overlong_reward)
        m["overlong_penalty"] = sum(shaped) / len(trajs)
        m["overlong_penalized"] = sum(p < 0 for p in shaped) / len(trajs)
    m.update(upd)
    m.update(engine or {})
    m.update(batch.get("offpolicy_metrics", {}))
    m.update(tool_metrics([t.info for tr in trajs for t in tr.turns]))
    m.update(agent_metrics(trajs))  # env.kind openai_agent: calls, steps, drift, failed sessions
    return m


# ---------------------------------------------------------------- the loop over iterations, on any backend
# `fit_loop` drives a `TrainingBackend` (the in-process `RLTrainer` above or the Ray `RayTrainer`):
# iterations with evaluation, logging and checkpoints on schedule. `log_finite` and `rollout_seed`
# are shared with the Ray layer.
#
# A full disk (ENOSPC, or a spent quota) anywhere in an iteration (a checkpoint, a metrics row, the
# MLflow buffer, the run's card) stops the loop with DiskFullError: which folder, and that the run
# resumes from its last checkpoint once there is space. Carrying on would lose every iteration's
# checkpoint and metrics while the run seemed to train.

def log_finite(sink: MetricsSink | None, step: int, metrics: dict[str, float]) -> None:
    if sink is not None and metrics:
        sink.log(step, {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)})


def rollout_seed(seed: int, iteration: int, shard: int = 0, round: int = 0) -> int:
    """The rollout seed of one shard of one iteration. Shard 0 is the whole batch of the
    in-process trainer, so one Ray worker reproduces it exactly; other shards are offset far
    enough that no (iteration, shard) pair shares a seed with another. `round`: dynamic sampling's
    extra rollouts of an iteration (`fill_batch`; 0 = the iteration's own), offset
    past every shard's."""
    return seed * 1_000_003 + iteration + shard * 100_000_007 + round * 10_000_000_000_037


class TrainingBackend(Protocol):
    """What `fit_loop` drives: `RLTrainer` in-process, or `RayTrainer` over Ray actors."""

    cfg: ExperimentConfig
    iteration: int
    eval_samples: list[dict[str, Any]]

    def train_step(self) -> dict[str, float]: ...
    def evaluate(self, greedy: bool = True) -> dict[str, float]: ...
    def save(self) -> Path: ...
    def _log(self, step: int, metrics: dict[str, float]) -> None: ...


def fit_loop(trainer: TrainingBackend, on_iteration: Any = None) -> dict[str, float]:
    """Iterations with evaluation, logging and checkpoints on schedule; returns the final metrics.
    A full disk raises DiskFullError naming the folder and the run to resume."""
    run = trainer.cfg.train.out_dir or None
    try:
        return _iterations(trainer, on_iteration)
    except Exception as raised:
        # a Ray learner's error comes wrapped (RayTaskError(OSError)): its `cause` is what happened
        err = getattr(raised, "cause", None) if isinstance(getattr(raised, "cause", None), Exception) else raised
        if isinstance(err, DiskFullError):  # a checkpoint save: it knows its folder, not the run
            raise DiskFullError(err.folder, run) from (err.__cause__ if err is raised else raised)
        if not is_disk_full(err):
            raise
        folders = _written_folders(err, trainer)
        raise DiskFullError(folders[0], run, where=" or ".join(map(str, folders))) from raised


def _written_folders(err: OSError, trainer: TrainingBackend) -> list[Path]:
    """Where the failed write went: the error's file, else every folder the run's sink writes to
    (`folders()`: an MLflow buffer's append names no file), else the run folder."""
    if err.filename:
        return [Path(err.filename).parent]
    sink = getattr(trainer, "sink", None)
    found = list(dict.fromkeys(sink.folders())) if hasattr(sink, "folders") else []
    return found or [Path(trainer.cfg.train.out_dir or ".")]


def _iterations(trainer: TrainingBackend, on_iteration: Any) -> dict[str, float]:
    t = trainer.cfg.train
    final: dict[str, float] = {}
    if trainer.iteration == 0 and trainer.eval_samples:
        trainer._log(0, {f"eval/{k}": v for k, v in trainer.evaluate().items()})
    while trainer.iteration < t.iterations:
        metrics = trainer.train_step()
        if t.eval_every and trainer.iteration % t.eval_every == 0 and trainer.iteration < t.iterations:
            metrics.update({f"eval/{k}": v for k, v in trainer.evaluate().items()})
        if trainer.iteration == t.iterations:
            metrics.update({f"eval/{k}": v for k, v in trainer.evaluate().items()})
            final = metrics
        trainer._log(trainer.iteration, metrics)
        if on_iteration is not None:
            on_iteration(trainer.iteration, metrics)
        if trainer.iteration % t.checkpoint_every == 0 or trainer.iteration == t.iterations:
            trainer.save()
    return final
