"""Data-parallel learner ranks: N copies of one `RLTrainer` whose update equals one learner's.

Design (the simplest thing that is exactly right):

- Every rank builds the same trainer; `join` broadcasts rank 0's weights (policy, reference,
  critic), so the replicas start equal whatever each rank loaded.
- Every rank gets the same gathered batch and runs the same `prepare`: the log-prob and value
  forward passes are split by rows (rank r computes its contiguous share into a zero-filled
  `[B, T]` tensor; an all-reduce SUM gathers them, adding only zeros), and the advantages (GRPO
  group statistics, whitening, GAE returns) are computed over the whole batch on every rank.
- In every mini-batch rank r runs forward/backward on its contiguous 1/N share of the rows, with
  the loss normalised by the WHOLE mini-batch's token (or sequence) count (the trainer counts
  `loss_denominator` over all rows before slicing), so the sum over ranks of the gradients is the
  one-learner gradient. One all-reduce SUM of a flat buffer per step makes the gradients equal on
  every rank; then the same clipping and the same optimiser step keep the replicas equal. The
  critic is updated the same way.
- Every rank runs the same number of forward and backward passes, whatever its share (FSDP makes
  each one a collective): the ranks agree on the most micro-batches any of them has, and the
  others add padding micro-batches that train nothing (a forward and a backward of a zero loss).
  A micro-batch without a loss token, or with a non-finite loss, still runs a zero backward.
- A non-finite loss on any rank makes every rank skip the step (a flag all-reduced with MIN, after
  every rank has run all its passes), so no rank waits in a collective the others never enter.
- Metrics: the additive shares (policy_loss, entropy, kl, value_loss) are summed over ranks and
  equal one learner's; per-micro-batch means (clipfrac, approx_kl, ratio_mean) are averaged over
  ranks (diagnostics, not exact).
- `train.fsdp: true` (CUDA only): the policy is sharded with FSDP2 `fully_shard` (FULL_SHARD:
  parameters, gradients and optimiser state split across ranks). FSDP reduce-scatters the
  gradients itself; its divide factor is set to 1 so they are summed like the replicas', and the
  gradient norm is the global one (DTensor). The critic and the reference stay replicas.
  agent_r1/training/fsdp.py holds the sharding and the whole-policy views (evaluation, weights
  for the rollout workers, checkpoints) a sharded run needs.

One learner (`LocalGroup`) is the identity on every hook: today's path, call for call.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from agent_r1.training.compute import micro_batch_count, pad_micro_batch
from agent_r1.training.fsdp import check_fsdp, is_sharded, shard_policy

ADDITIVE = ("policy_loss", "entropy", "kl", "value_loss")  # shares of the mini-batch value: they add up


class LocalGroup:
    """One learner: no process group; every hook leaves the trainer's arithmetic as it was."""

    rank, world, fsdp = 0, 1, False

    def micro_batches(self, compute: Any, batch: dict[str, Any],
                      rows: torch.Tensor | None = None) -> Iterator[tuple[torch.Tensor, dict[str, Any]]]:
        return compute.micro_batches(batch, rows)

    def gather_rows(self, out: torch.Tensor) -> torch.Tensor:
        return out

    def sync_policy(self, trainer: Any, record: dict[str, float] | None) -> dict[str, float] | None:
        return record

    def sync_critic(self, params: list[torch.nn.Parameter], record: dict[str, float]) -> dict[str, float]:
        return record

    def clip_grad_norm(self, params: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
        return torch.nn.utils.clip_grad_norm_(list(params), max_norm)


class DataParallel(LocalGroup):
    """Rank `rank` of `world` learner replicas over the default torch.distributed process group."""

    def __init__(self, rank: int, world: int, fsdp: bool = False, device: torch.device | None = None):
        self.rank, self.world, self.fsdp = rank, world, fsdp
        self.device = device or torch.device("cpu")  # where collectives run (NCCL: the rank's GPU)

    def _all_reduce(self, tensor: torch.Tensor, op: Any = None) -> torch.Tensor:
        """All-reduce (SUM by default) on the collective device; the result where `tensor` was."""
        on = tensor.to(self.device)
        torch.distributed.all_reduce(on, op=op or torch.distributed.ReduceOp.SUM)
        return on.to(tensor.device)

    def share(self, rows: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous share of `rows` (the first ranks one longer; possibly empty)."""
        size, extra = divmod(len(rows), self.world)
        start = self.rank * size + min(self.rank, extra)
        return rows[start:start + size + (1 if self.rank < extra else 0)]

    def micro_batches(self, compute: Any, batch: dict[str, Any],
                      rows: torch.Tensor | None = None) -> Iterator[tuple[torch.Tensor, dict[str, Any]]]:
        """This rank's share in micro-batches, then padding micro-batches (empty row indices, see
        `pad_micro_batch`) up to the most any rank runs: with FSDP every forward and backward is a
        collective, so a rank with fewer passes would leave the others waiting for ever."""
        rows = torch.arange(batch["input_ids"].shape[0]) if rows is None else rows
        mine = self.share(rows)
        count = micro_batch_count(compute, len(mine))
        most = int(self._all_reduce(torch.tensor([count]), torch.distributed.ReduceOp.MAX).item())
        if len(mine):
            yield from compute.micro_batches(batch, mine)
        for _ in range(most - count):
            yield torch.zeros(0, dtype=torch.long), pad_micro_batch(compute, batch)

    def gather_rows(self, out: torch.Tensor) -> torch.Tensor:
        """Each rank filled its rows of a zero tensor: the SUM is every row, exactly."""
        return self._all_reduce(out)

    def _agree(self, ok: bool) -> bool:
        flag = torch.tensor([1 if ok else 0], dtype=torch.int64)
        return bool(self._all_reduce(flag, torch.distributed.ReduceOp.MIN).item())

    def sync_policy(self, trainer: Any, record: dict[str, float] | None) -> dict[str, float] | None:
        if not self._agree(record is not None):
            if record is not None:  # another rank saw a non-finite loss (it counted it already)
                trainer._bad_update("a non-finite policy loss on another learner rank")
            return None
        # FSDP reduce-scattered the sharded (decoder layer) gradients in backward; the rest are replicas
        sum_grads([p for p in trainer.model.parameters() if p.requires_grad and not is_sharded(p)])
        return self._reduce_metrics(record)

    def sync_critic(self, params: list[torch.nn.Parameter], record: dict[str, float]) -> dict[str, float]:
        sum_grads([p for p in params if p.requires_grad])
        return self._reduce_metrics(record)

    def clip_grad_norm(self, params: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
        params = [p for p in params if p.grad is not None]
        if not any(is_sharded(p) for p in params):
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        # FSDP: sharded gradients (DTensor) and replicated ones; the global norm is the sum of the
        # shards' squares over ranks plus the replicas' squares (counted once: they are equal)
        sq = torch.zeros((), dtype=torch.float32, device=self.device)
        for p in params:
            if is_sharded(p):
                sq += p.grad.to_local().float().pow(2).sum().to(self.device)
        sq = self._all_reduce(sq)
        for p in params:
            if not is_sharded(p):
                sq += p.grad.float().pow(2).sum().to(self.device)
        norm = sq.sqrt()
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        for p in params:
            (p.grad.to_local() if is_sharded(p) else p.grad).mul_(coef.to(p.device))
        return norm

    def _reduce_metrics(self, record: dict[str, float]) -> dict[str, float]:
        # a rank whose share had no micro-batch has fewer keys: agree on the union, in one order
        gathered: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(gathered, sorted(record))
        keys = sorted(set().union(*gathered))
        values = self._all_reduce(torch.tensor([record.get(k, 0.0) for k in keys], dtype=torch.float64))
        return {k: float(v) if k in ADDITIVE else float(v) / self.world for k, v in zip(keys, values.tolist())}


def sum_grads(params: list[torch.nn.Parameter]) -> None:
    """All-reduce SUM of the gradients as one flat buffer (one collective per step). A parameter
    without a gradient on some ranks gets zeros there; one without a gradient on every rank stays
    None, as with one learner (AdamW skips it)."""
    if not params:
        return
    device = params[0].device
    has = torch.tensor([p.grad is not None for p in params], dtype=torch.int64, device=device)
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    torch.distributed.all_reduce(has, op=torch.distributed.ReduceOp.SUM)
    torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM)
    offset = 0
    for p, n in zip(params, has.tolist()):
        size = p.numel()
        p.grad = flat[offset:offset + size].view_as(p).clone() if n else None
        offset += size


def num_learners(rc: Any) -> int:
    """`ray.num_learners`: data-parallel learner ranks (1 = one learner, today's path)."""
    n = int(rc.num_learners)
    if n < 1:
        raise ValueError(f"ray.num_learners={n}; it must be >= 1")
    return n


def learner_gpus(cfg: Any) -> float:
    """One GPU per learner rank when the learner trains on CUDA (NCCL needs a device per rank)."""
    return 1.0 if cfg.train.device.startswith("cuda") else 0.0


def free_address(host: str = "127.0.0.1") -> str:
    """A `tcp://host:port` rendezvous address with a port free on this host now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return f"tcp://{host}:{s.getsockname()[1]}"


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def join(trainer: Any, rank: int, world: int, address: str, allow_cpu_fsdp: bool = False) -> DataParallel:
    """Makes `trainer` rank `rank` of `world`: the process group (gloo on CPU, NCCL on CUDA), rank 0's
    weights everywhere, and FSDP if `train.fsdp`. Every rank calls this at the same time."""
    import torch.distributed as dist

    fsdp = bool(trainer.cfg.train.fsdp)
    if not allow_cpu_fsdp:
        check_fsdp(fsdp, trainer.compute.device)
    if not dist.is_initialized():
        dist.init_process_group(backend_for(trainer.compute.device), init_method=address, rank=rank,
                                world_size=world)
    for module in (trainer.model, trainer.reference, trainer.critic):
        if module is not None:
            with torch.no_grad():
                for tensor in module.state_dict().values():
                    dist.broadcast(tensor, src=0)
    device = trainer.compute.device
    group = DataParallel(rank, world, fsdp, device if device.type == "cuda" else None)
    if fsdp:
        shard_policy(trainer)
    trainer.dp = group
    return group


def leave() -> None:
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
