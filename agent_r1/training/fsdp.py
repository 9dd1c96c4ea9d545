"""FSDP2 over the learner ranks (`train.fsdp: true`, CUDA): sharding the policy, and the whole-policy
views a sharded run still needs.

- `shard_policy`: `fully_shard` (FULL_SHARD) over each decoder layer, gradients summed like the
  replicas', the optimiser and scheduler rebuilt over the shards, carrying over any state they
  held (a resumed run loaded it from the checkpoint before sharding).
- `gathered(model)`: every decoder layer's parameters all-gathered at once (a collective every rank
  enters), so rank 0 can then evaluate alone: a forward over layers already gathered issues no
  collective, which a per-layer gather inside generation would (the other ranks are not there).
- `full_state_dict` / `full_optimizer_state`: the full weights and optimiser state on rank 0
  (collectives; the other ranks get empty dicts), so a checkpoint is the same files as an unsharded
  run's: the optimiser state keyed by parameter index, as `torch.optim.Optimizer.state_dict` does,
  and a checkpoint saved with FSDP resumes without it and the reverse.

The parameter index of the optimiser is the position in `[p for p in model.parameters() if
p.requires_grad]`, the order both the trainer and `shard_policy` build their AdamW with;
`fully_shard` replaces parameters in place, so names and order are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch


def check_fsdp(fsdp: bool, device: torch.device) -> None:
    if fsdp and device.type != "cuda":
        raise ValueError(f"train.fsdp=true shards the policy over CUDA devices, but the learner's device is "
                         f"{device}; set train.fsdp: false (CPU learners are replicas over gloo) or train.device: cuda")


def is_sharded(p: torch.Tensor) -> bool:
    return hasattr(p, "full_tensor")  # a DTensor: an FSDP shard


def fsdp_layers(model: Any) -> list[Any]:
    """The policy's modules wrapped by `fully_shard` (empty when the policy is not sharded)."""
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def trainable_names(model: Any) -> list[str]:
    """Parameter names in optimiser order (see the module docstring)."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def shard_policy(trainer: Any) -> None:
    """FSDP2 (`fully_shard`, FULL_SHARD) over each decoder layer, where nearly all the weights are;
    gradients summed (divide factor 1, as the replicas'); the optimiser and scheduler rebuilt over
    the sharded (DTensor) parameters, with the state the old ones held. The embeddings, final norm
    and output head stay replicas: the trainer calls the decoder and the head separately (chunked
    log-probs), never the root's forward that FSDP would hook, and they are often tied.

    Each layer is its own FSDP root, and a root keeps its parameters gathered from forward to
    backward; that is set explicitly here, so a no-grad forward (log-probs, evaluation) never
    reshards behind `gathered`'s back."""
    from torch.distributed.fsdp import fully_shard

    from agent_r1.algos.schedules import make_scheduler

    model, cfg = trainer.model, trainer.cfg
    layers = list(getattr(model.get_decoder(), "layers", []))
    if not layers:
        raise ValueError(f"train.fsdp=true shards the decoder layers, but {type(model).__name__} has no "
                         "get_decoder().layers; set train.fsdp: false")
    optimizer_state, scheduler_state = trainer.optimizer.state_dict(), trainer.scheduler.state_dict()
    for layer in layers:
        fully_shard(layer, reshard_after_forward=False)
        layer.set_gradient_divide_factor(1.0)
        if trainer.compute.device.type != "cuda":  # gloo (the CPU check) has no PREMUL_SUM: a plain SUM
            layer.set_force_sum_reduction_for_comms(True)
    trainer.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.train.lr,
                                          weight_decay=cfg.train.weight_decay)
    trainer.scheduler = make_scheduler(trainer.optimizer, cfg.train)  # first: it adds initial_lr to the groups
    if optimizer_state["state"]:  # resumed: every rank loaded the full state; each keeps its shard
        load_full_optimizer_state(model, trainer.optimizer, optimizer_state)
    trainer.scheduler.load_state_dict(scheduler_state)


@contextmanager
def gathered(model: Any) -> Iterator[None]:
    """Every sharded layer's full parameters on every rank (one all-gather per layer, a collective)
    for the block's duration, then resharded (local). Inside it a forward issues no collective."""
    layers = fsdp_layers(model)
    for layer in layers:
        layer.unshard()
    try:
        yield
    finally:
        for layer in layers:
            layer.reshard()


def _full_options() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The policy's full weights on CPU; with FSDP a collective every rank must enter, and only
    rank 0 gets the weights (the others an empty dict)."""
    if any(is_sharded(p) for p in model.parameters()):
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        return get_model_state_dict(model, options=_full_options())
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def full_optimizer_state(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimiser's full state on rank 0, keyed by parameter index like an unsharded optimiser's
    `state_dict()` (a collective; the other ranks get {})."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    by_name = get_optimizer_state_dict(model, optimizer, options=_full_options())
    if not by_name:
        return {}
    index = {name: i for i, name in enumerate(trainable_names(model))}
    return {"state": {index[name]: s for name, s in by_name["state"].items()},
            "param_groups": [{**g, "params": [index[name] for name in g["params"]]} for g in by_name["param_groups"]]}


def load_full_optimizer_state(model: Any, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Loads an index-keyed full optimiser state (an unsharded `state_dict()`, or a checkpoint's)
    into an optimiser over sharded parameters: each rank keeps its shard of every tensor."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    names = trainable_names(model)
    by_name = {"state": {names[i]: s for i, s in state["state"].items()},
               "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, by_name, options=StateDictOptions(full_state_dict=True))


class _FullWeights:
    """The policy as `save_checkpoint` sees it: `save_pretrained` writes the gathered full weights."""

    def __init__(self, model: Any, weights: dict[str, torch.Tensor]):
        self.model, self.weights = model, weights

    def save_pretrained(self, folder: Path) -> None:
        self.model.save_pretrained(folder, state_dict=self.weights)


def save_full_checkpoint(trainer: Any, rank: int) -> Path | None:
    """`RLTrainer.save` for a sharded policy: every rank enters the gathers, rank 0 writes the same
    checkpoint an unsharded run would (full weights, index-keyed optimiser state) and returns its
    folder; the other ranks return None."""
    from agent_r1.training import checkpoint as ckpt

    weights = full_state_dict(trainer.model)
    optimizer = full_optimizer_state(trainer.model, trainer.optimizer)
    if rank != 0:
        return None
    state = {**trainer.state_dict(), "optimizer": optimizer}
    return ckpt.save_checkpoint(trainer.out_dir / "checkpoints", trainer.iteration, _FullWeights(trainer.model, weights),
                                trainer.tokenizer, state, keep=trainer.cfg.train.keep_checkpoints)
