"""The two Ray actors of distributed training, as plain classes (testable without Ray).

- `Learner` holds an in-process `RLTrainer` (policy, reference, critic, optimisers, the prompt
  sampler, checkpoints) and does the learner's half of each iteration with `RLTrainer.learn`.
- `RolloutWorker` holds a generation engine, the env and its own retriever; it rolls out one
  shard of an iteration's prompts with the seed of that (iteration, shard), so a shard rolled
  out again (after the worker died) gives the same trajectories. Each shard comes back with the
  Ray node and process that rolled it out (`ShardResult`), so the driver can say where work ran.

Asynchronous training (`train.max_staleness` k >= 1) draws the prompts of up to k iterations
ahead of the update; the learner remembers the sampler position before each draw not yet learned,
so a checkpoint saves the position of the oldest one: a resumed run draws (and rolls out again)
exactly the prompts whose rollouts were in flight when it was saved.

Data-parallel learners (`ray.num_learners` N > 1): rank 0 builds the run (`RunHandle.parts`,
the only rank that writes to the run folder), ranks 1..N-1 are built from rank 0's parts
(`Learner.parts`: policy, tokenizer, reference, samples, the checkpoint resumed from), then all
`join` one torch.distributed group (agent_r1/training/distributed.py) and every `learn` is a
collective: each rank updates on its share of each mini-batch. Rank 0 alone draws prompts, hands
out weights, evaluates and saves checkpoints. With `train.fsdp` (the policy's decoder layers
sharded over the ranks, agent_r1/training/fsdp.py) `weights`, `evaluate` and `save` are
collectives too: every rank enters the gathers, and rank 0 alone gets (and writes) the result.

`ray_trainer.py` wraps them with `ray.remote` and coordinates; nothing here imports Ray at the
top level.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

from agent_r1.closing import close_all
from agent_r1.config import ExperimentConfig
from agent_r1.trajectory import Trajectory


class RunHandle(Protocol):
    """What the actors build a run's parts from: the run's picklable spec (agent_r1/runs/run.py
    `RunSpec`, from `Run.spec()`), handed in so `training/` never imports the layer above it."""

    resume: bool

    @property
    def cfg(self) -> ExperimentConfig: ...

    def parts(self) -> Any: ...  # model, tokenizer, reference, latest, index_dir, samples

    def open_index(self, index_dir: str | Path) -> Any: ...

    def env_factory(self, retriever: Any) -> Callable[[dict[str, Any]], Any]: ...


@dataclass(frozen=True)
class ShardResult:
    """One shard's trajectories, where they were rolled out (Ray node id, worker pid), and when
    (wall-clock `time.time()` seconds at the rollout's start and end, to show overlap with updates)."""

    trajectories: list[Trajectory]
    node_id: str
    pid: int
    started: float = 0.0
    finished: float = 0.0
    weight_sync_s: float = 0.0  # seconds this shard's engine spent taking new weights (vLLM; 0 otherwise)


def node_id() -> str:
    """The Ray node this process runs on; "local" outside Ray (the plain classes, in tests)."""
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"


def close_actors(actors: list[Any], timeout_s: float = 30) -> None:
    """Asks every actor to close (each ends what it started: its process group, MCP servers, vLLM's
    engine core) for up to `timeout_s`, then kills them all. A close that fails or times out is
    swallowed: a dead actor cannot answer, and closing must not hide the error that got us here."""
    import ray

    if actors:
        try:
            ray.get([actor.close.remote() for actor in actors], timeout=timeout_s)
        except Exception:  # noqa: BLE001
            pass
    for actor in actors:
        ray.kill(actor)


def _threads(n: int) -> None:
    import torch

    if n > 0:
        torch.set_num_threads(n)


class Learner:
    """Builds the run like `agent-r1 train` does (data, index, policy, resume) and trains it."""

    def __init__(self, run: RunHandle, parts: Any = None):
        """`parts`: rank 0's `Learner.parts()` for the other data-parallel ranks (None: build the run)."""
        from agent_r1.training.trainer import RLTrainer

        cfg = run.cfg
        _threads(cfg.train.threads)
        parts = run.parts() if parts is None else parts
        self._samples = (parts.train_samples, parts.eval_samples)
        self.cfg = cfg
        self.index_dir = str(parts.index_dir)
        self.retriever = run.open_index(parts.index_dir)  # the learner evaluates in-process
        # the rollout workers generate (rollout.engine); a learner's engine only evaluates, so it reads the
        # policy it trains: no second copy of the weights (a vLLM engine) beside the learner on its device
        self.trainer = RLTrainer(cfg, parts.model, parts.tokenizer, run.env_factory(self.retriever),
                                 parts.train_samples, parts.eval_samples, sink=None, reference=parts.reference,
                                 engine="transformers")
        self.resumed_from = str(parts.latest) if parts.latest is not None else None
        if parts.latest is not None:
            self.trainer.load(parts.latest)
        self.version = 0  # bumped by every update; rollout workers compare it with theirs
        self._draws: deque[dict[str, int]] = deque()  # sampler positions before each draw not yet learned

    def parts(self) -> SimpleNamespace:
        """What another data-parallel rank is built from (its weights are then rank 0's, broadcast)."""
        t = self.trainer
        return SimpleNamespace(model=t.model, tokenizer=t.tokenizer, reference=t.reference,
                               latest=Path(self.resumed_from) if self.resumed_from else None, index_dir=self.index_dir, train_samples=self._samples[0],
                               eval_samples=self._samples[1])

    def rendezvous(self, local: bool) -> str:
        """The process group's address: a free port on this node (127.0.0.1 on a local Ray)."""
        from agent_r1.training.distributed import free_address

        if local:
            return free_address()
        import ray

        return free_address(ray.util.get_node_ip_address())

    def join(self, rank: int, world: int, address: str, allow_cpu_fsdp: bool = False) -> int:
        """Joins the learners' process group as `rank` of `world` (every rank at once).
        `allow_cpu_fsdp`: tests only, FSDP over gloo (refused to users on CPU)."""
        from agent_r1.training.distributed import join

        join(self.trainer, rank, world, address, allow_cpu_fsdp=allow_cpu_fsdp)
        return rank

    def info(self) -> dict[str, Any]:
        return {"iteration": self.trainer.iteration, "version": self.version, "index_dir": self.index_dir,
                "precision": self.trainer.compute.precision,
                "resumed_from": self.resumed_from, "eval_samples": self.trainer.eval_samples, "pid": os.getpid()}

    def policy(self) -> tuple[Any, Any, int]:
        """(model, tokenizer, version): what a rollout worker is built from (a snapshot)."""
        return self.trainer.model, self.trainer.tokenizer, self.version

    def tokenizer(self) -> Any:
        return self.trainer.tokenizer

    def weights(self) -> dict[str, Any]:
        """The policy's state dict on CPU; put once in the object store, read by every worker.
        Sharded (FSDP): a collective, and only rank 0 gets the weights."""
        from agent_r1.training.fsdp import full_state_dict

        return full_state_dict(self.trainer.model)

    def next_prompts(self, extra: bool = False) -> list[dict[str, Any]]:
        """The next `train.prompts_per_iter` prompts. `extra`: dynamic sampling's further draw for the
        iteration being learned next: part of that iteration's draw, so not a draw of its own in `_draws`."""
        if not extra:
            self._draws.append(self.trainer.sampler.state_dict())
        return self.trainer.sampler.next_batch(self.cfg.train.prompts_per_iter)

    def learn(self, trajs: list[Trajectory], rollout_s: float) -> tuple[dict[str, float], int]:
        """Updates on `trajs` (the oldest batch drawn and not yet learned); returns (metrics, new
        version). Staleness = this learner's version now - the version that sampled a trajectory."""
        staleness = [self.version - t.policy_version for t in trajs]
        limit = max_staleness(self.cfg)
        if trajs and max(staleness) > limit:  # the driver never submits further ahead: a bug, not data
            raise RuntimeError(f"a batch sampled by policy version {min(t.policy_version for t in trajs)} reached "
                               f"the learner at version {self.version}: staleness {max(staleness)} > "
                               f"train.max_staleness={limit}")
        metrics = self.trainer.learn(trajs, rollout_s)
        if self._draws:
            self._draws.popleft()
        metrics["staleness/mean"] = sum(staleness) / max(len(staleness), 1)
        metrics["staleness/max"] = float(max(staleness, default=0))
        self.version += 1
        return metrics, self.version

    def evaluate(self, greedy: bool = True) -> dict[str, float]:
        """Held-out metrics. Sharded (FSDP): every rank gathers the layers, rank 0 evaluates alone
        (the others return {}): generation's length depends on the samples, so ranks stepping
        through it together could fall out of step in a collective."""
        dp = self.trainer.dp
        if not dp.fsdp:
            return self.trainer.evaluate(greedy=greedy)
        from agent_r1.training.fsdp import gathered

        with gathered(self.trainer.model):
            return self.trainer.evaluate(greedy=greedy) if dp.rank == 0 else {}

    def save(self) -> str:
        """A checkpoint of the learned iterations; batches drawn ahead (in flight) are left out: the
        sampler is saved at the position before the oldest of them, so a resume draws them again.
        Sharded (FSDP): every rank gathers, rank 0 writes (the others return "")."""
        with self._sampler_at_oldest_draw():
            if not self.trainer.dp.fsdp:
                return str(self.trainer.save())
            from agent_r1.training.fsdp import save_full_checkpoint

            path = save_full_checkpoint(self.trainer, self.trainer.dp.rank)
            return str(path) if path is not None else ""

    @contextmanager
    def _sampler_at_oldest_draw(self) -> Iterator[None]:
        if not self._draws:
            yield
            return
        sampler = self.trainer.sampler
        now = sampler.state_dict()
        sampler.load_state_dict(self._draws[0])
        try:
            yield
        finally:
            sampler.load_state_dict(now)

    def close(self) -> None:
        from agent_r1.training.distributed import leave

        leave()
        self.trainer.close()
        self.retriever.close()


class RolloutWorker:
    """A generation engine + env + retriever; rolls out shards with the learner's latest weights."""

    def __init__(self, run: RunHandle, index_dir: str, policy: tuple[Any, Any, int],
                 threads: int = 1, precision: str = "fp32"):
        """`precision`: the learner's resolved `train.precision` (fp32 | bf16): a transformers engine
        samples under the same autocast as the learner's forward, so the trajectories' log-probs are
        the learner's own (vLLM runs in its own dtype; the drift metric shows it)."""
        from agent_r1.rollout.chat import ChatCodec
        import torch

        from agent_r1.rollout.engines import EngineWeights, build_engine, options_from_config
        from agent_r1.training.compute import Compute

        cfg = run.cfg
        _threads(threads)
        model, tokenizer, self.version = policy
        self.cfg, self.model = cfg, model
        self.retriever = run.open_index(index_dir)  # tantivy opens read-only in many processes
        self.make_env = run.env_factory(self.retriever)
        self.codec = ChatCodec(tokenizer)
        self.engine = build_engine(cfg.rollout.engine, model, tokenizer, options_from_config(cfg, precision=precision))
        self.engine_weights = EngineWeights(self.engine, model)
        # the transformers engine computes in this process: under the learner's autocast
        device = self.engine.device if isinstance(getattr(self.engine, "device", None), str) else None
        self.compute = Compute(device=torch.device(device or "cpu"), precision=precision if device else "fp32")

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        """Ends what this worker started before its actor is killed: its env's MCP server connections
        (a stdio server is this process's child), its engine (vLLM's engine-core process), its retriever."""
        close_all(self.make_env, self.engine, self.retriever)

    def node(self) -> dict[str, Any]:
        """Where this worker runs: {"node_id", "pid"} (a restarted worker may be on another node)."""
        return {"node_id": node_id(), "pid": os.getpid()}

    def load_weights(self, weights: dict[str, Any]) -> None:
        """The learner's state dict (peft names with LoRA) into this worker's policy copy; an engine with
        its own copy of the weights (vLLM) gets them, adapters merged, before its next rollout."""
        self.model.load_state_dict(weights)
        self.engine_weights.mark_stale()

    def rollout(self, samples: list[dict[str, Any]], iteration: int, shard: int, version: int,
                weights_box: list[Any], round: int = 0) -> ShardResult:
        """Rolls out `samples` with weights `version`. `weights_box` holds the ObjectRef of those
        weights inside a list, so Ray does not fetch them unless this worker's copy is stale.
        `round`: dynamic sampling's extra rollouts of the iteration (a seed of their own)."""
        from agent_r1.rollout.loop import run_rollout
        from agent_r1.training.trainer import rollout_seed

        started = time.time()
        if version != self.version:
            import ray

            self.load_weights(ray.get(weights_box[0]))
            self.version = version
        syncs = self.engine_weights.syncs
        engine = self.engine_weights.current()
        sync_s = self.engine_weights.last_sync_s if self.engine_weights.syncs > syncs else 0.0
        with self.compute.autocast():  # the learner's precision (RLTrainer.rollout does the same)
            trajs = run_rollout(engine, self.codec, self.make_env, samples, self.cfg.rollout, self.cfg.reward,
                                seed=rollout_seed(self.cfg.seed, iteration, shard, round))
        for t in trajs:
            t.policy_version = version
        return ShardResult(trajs, node_id(), os.getpid(), started, time.time(), sync_s)


def max_staleness(cfg: ExperimentConfig) -> int:
    """`train.max_staleness`: 0 = synchronous."""
    return int(cfg.train.max_staleness)
