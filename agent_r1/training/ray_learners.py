"""The learner side of the Ray backend: one `Learner` actor, or `ray.num_learners` N data-parallel
ranks over one torch.distributed group (agent_r1/training/distributed.py), behind one object.

Rank 0 is built first (it alone prepares the run folder), ranks 1..N-1 from its parts; they join
one group (gloo on CPU, NCCL on CUDA) at an address on rank 0's node. The learners are not
restarted: their state is the run's; resume from a checkpoint instead. They stay on the driver's
node (soft: elsewhere if that node is full), so the loss of another node costs only rollout
workers, which are restarted.

Which calls every rank must receive:
- `learn` always (with N > 1): each rank updates on its share of every mini-batch;
- `weights`, `evaluate` and `save` with `train.fsdp` too: the policy's decoder layers are sharded
  over the ranks, so each is a gather every rank enters (rank 0 alone gets the result);
- `next_prompts`, `info`, `tokenizer`: rank 0 only.
A rank runs its calls in submission order, and the driver submits each collective to every rank
before the next, so the ranks meet in the same collectives in the same order.
"""

from __future__ import annotations

import logging
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.training.distributed import learner_gpus, num_learners
from agent_r1.training.ray_actors import close_actors
from agent_r1.trajectory import Trajectory

log = logging.getLogger(__name__)


class LearnerGroup:
    """The learner actors (`ranks`, rank 0 first). `start` builds them; `close` stops them, also
    after a `start` that failed half-way."""

    def __init__(self, cfg: ExperimentConfig):
        self.cfg = cfg
        self.ranks: list[Any] = []
        self.sharded = bool(cfg.train.fsdp) and num_learners(cfg.ray) > 1
        self.info: dict[str, Any] = {}
        self.policy_ref: Any = None

    @property
    def rank0(self) -> Any:
        return self.ranks[0]

    def start(self, run: Any, allow_cpu_fsdp: bool = False) -> None:
        """Rank 0, the snapshot the rollout workers are built from, then ranks 1..N-1 joined to it.
        `allow_cpu_fsdp`: tests only, FSDP over gloo (refused to users on CPU)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from agent_r1.training.ray_actors import Learner

        cfg, rc = self.cfg, self.cfg.ray
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        learner_cls = ray.remote(Learner).options(num_cpus=rc.learner_cpus, num_gpus=learner_gpus(cfg),
                                                  max_restarts=0, scheduling_strategy=here)
        self.ranks = [learner_cls.remote(run)]
        self.info = ray.get(self.rank0.info.remote())
        # taken before the ranks join, while rank 0's policy is whole (FSDP shards it in `join`)
        self.policy_ref = self.rank0.policy.remote()
        if cfg.train.fsdp and num_learners(rc) == 1:
            log.warning("train.fsdp=true with ray.num_learners=1: nothing to shard over, the learner is unsharded")
        if num_learners(rc) == 1:
            return
        parts = self.rank0.parts.remote()
        self.ranks += [learner_cls.remote(run, parts) for _ in range(num_learners(rc) - 1)]
        address = ray.get(self.rank0.rendezvous.remote(not rc.address))
        ray.get([lr.join.remote(rank, len(self.ranks), address, allow_cpu_fsdp)
                 for rank, lr in enumerate(self.ranks)])

    def _rank0_of(self, method: str, *args: Any) -> Any:
        """Submits `method` to every rank when the policy is sharded (a collective), else to rank 0;
        returns rank 0's ObjectRef."""
        ranks = self.ranks if self.sharded else self.ranks[:1]
        return [getattr(lr, method).remote(*args) for lr in ranks][0]

    def weights_ref(self) -> Any:
        """An ObjectRef of the policy's full weights (left in the object store)."""
        return self._rank0_of("weights")

    def next_prompts(self, extra: bool = False) -> list[dict[str, Any]]:
        import ray

        return ray.get(self.rank0.next_prompts.remote(extra))

    def learn(self, trajs: list[Trajectory], rollout_s: float) -> tuple[dict[str, float], int]:
        """(rank 0's metrics, the new version). With N > 1 every rank learns on the same batch, put once."""
        import ray

        if len(self.ranks) == 1:
            return ray.get(self.rank0.learn.remote(trajs, rollout_s))
        batch = ray.put(trajs)
        return ray.get([lr.learn.remote(batch, rollout_s) for lr in self.ranks])[0]

    def evaluate(self, greedy: bool) -> dict[str, float]:
        import ray

        return ray.get(self._rank0_of("evaluate", greedy))

    def save(self) -> str:
        import ray

        return ray.get(self._rank0_of("save"))

    def tokenizer(self) -> Any:
        import ray

        return ray.get(self.rank0.tokenizer.remote())

    def all_weights(self) -> list[dict[str, Any]]:
        """Every rank's policy weights (the replicas should be equal); sharded, rank 0's full
        weights only (no rank holds another copy)."""
        import ray

        if self.sharded:
            return [ray.get(self.weights_ref())]
        return ray.get([lr.weights.remote() for lr in self.ranks])

    def close(self) -> None:
        """Leaves the process group on every rank, then stops the actors."""
        close_actors(self.ranks)
        self.ranks, self.policy_ref = [], None
