"""The Ray backend: the in-process trainer's iteration, with rollouts spread over Ray actors.

A thin adapter over `RLTrainer` (the reference): one `Learner` actor holds the trainer (policy,
reference, critic, optimisers, sampler, checkpoints); N `RolloutWorker` actors hold an engine
and the env with its own retriever. Each iteration the driver

1. asks the learner for the iteration's prompts (the sampler lives with the learner);
2. splits them into N contiguous shards; worker k rolls out shard k with the seed of
   (seed, iteration, k). Shard 0 of one worker is the in-process trainer's whole batch with its
   seed, so one worker reproduces the in-process run exactly;
3. weights travel through the object store, put once per learner version, and a worker reads
   them only when its copy is older;
4. a worker that dies mid-iteration is restarted by Ray (`ray.max_restarts`) and its shard is
   rolled out again, with the same seed: no prompt is lost or rolled out twice;
5. the gathered trajectories (in shard order) go to the learner for `RLTrainer.learn`;
6. where each shard ran (Ray node, worker pid, attempts) is kept in `last_shard_nodes`, counted
   in the metric `ray/nodes_used`, and appended to `<train.out_dir>/ray_shards.jsonl`.

Placement on a cluster: the learner is pinned (softly) to the driver's node, so losing another
node never loses the run's state; the workers are spread over the nodes (`SPREAD`), and a worker
whose node dies is restarted on any node with room for it.

Asynchronous training (`train.max_staleness` k >= 1): before the update of iteration i, the driver
submits the rollouts of iterations up to i + k with the weights the learner has now, so the workers
roll out while the learner updates (actor calls run in submission order, so those weights are read
before the update starts). A batch is learned at most k versions after the weights that sampled it:
the driver never submits further ahead, so a rollout waits for the learner rather than being thrown
away (dropping would waste rollouts and break "every prompt once per iteration"). Each trajectory
carries its `policy_version`; the learner logs `staleness/mean` and `staleness/max` and corrects for
the lag with decoupled PPO (agent_r1/algos/losses.py). Rollout seeds stay (seed, iteration, shard).
No rollout is submitted past `train.iterations`. A checkpoint holds the learned iterations only: the
batches in flight when it is saved are not in it, and a resumed run draws and rolls out their
prompts again, with the checkpoint's weights (so a resumed asynchronous run is not bit-identical to
an uninterrupted one; a synchronous run is). k = 0 is today's synchronous loop, call for call.

Data-parallel learners (`ray.num_learners` N > 1, with `train.fsdp` their policy sharded): the
learner actors are a `LearnerGroup` (agent_r1/training/ray_learners.py), which knows which calls
every rank must receive. Each iteration's trajectories are put in the object store once and every
rank learns on them; prompts, weights, evaluation and checkpoints come from rank 0. N = 1 is the
single learner, call for call.

The loop (evaluation, logging, checkpoints) is `fit_loop`, shared with the in-process trainer.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig, RayConfig
from agent_r1.training.distributed import num_learners
from agent_r1.tracking.metrics import JsonlMetrics, MetricsSink
from agent_r1.training.ray_actors import close_actors, max_staleness
from agent_r1.training.ray_auth import follow_environment, set_local_auth
from agent_r1.training.ray_learners import LearnerGroup
from agent_r1.training.trainer import fill_batch, fit_loop, log_finite
from agent_r1.trajectory import Trajectory

log = logging.getLogger(__name__)

# Ray's socket paths (<temp>/session_<date>_<pid>/sockets/plasma_store) must fit in 107 bytes
MAX_TEMP_DIR_CHARS = 40
WORKER_RESTART_TIMEOUT_S = 300.0
SHARDS_FILE = "ray_shards.jsonl"  # in the run folder: one line per iteration, which node rolled out which shard


def ray_temp_dir(rc: RayConfig) -> str:
    """`ray.temp_dir`, else `.ray` in the working directory (the project), else a short /tmp path."""
    if rc.temp_dir:
        return str(Path(rc.temp_dir).resolve())
    inside = Path.cwd() / ".ray"
    if len(str(inside)) <= MAX_TEMP_DIR_CHARS:
        return str(inside)
    return f"/tmp/agent-r1-ray-{os.getuid()}"


def init_ray(rc: RayConfig) -> bool:
    """Connects to `ray.address`, or starts a local Ray (no dashboard, token auth on unless
    `ray.insecure`, temp files and the token in the project). Returns True if this call initialised Ray (so the caller shuts
    it down), False if Ray was already up in this process."""
    import ray

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network calls home
    if rc.address:
        follow_environment()  # the cluster's auth, as the environment says (ray_auth.py)
        ray.init(address=rc.address)
        return True
    temp_dir = ray_temp_dir(rc)
    set_local_auth(temp_dir, rc.insecure)  # token auth unless ray.insecure (ray_auth.py says why)
    # Ray runs workers at niceness 15 by default; here the actors are the training job itself and
    # would otherwise lose the CPU to anything else on the machine (the in-process trainer runs at 0)
    os.environ.setdefault("RAY_worker_niceness", "0")
    needed = math.ceil(num_learners(rc) * rc.learner_cpus + rc.num_workers * rc.cpus_per_worker)
    # the learner and the workers take turns (rollout, then update), so logical CPUs may exceed cores
    num_cpus = rc.num_cpus or max(os.cpu_count() or 1, needed)
    # no dashboard; Ray's own gRPC servers (GCS, raylet, workers) listen on every interface whatever
    # the node address, which is why the token above is needed
    ray.init(num_cpus=num_cpus, include_dashboard=False, _temp_dir=temp_dir, configure_logging=False)
    return True


@dataclass
class InFlight:
    """One iteration's rollout, submitted and not yet gathered: its shards, the weights version
    they are rolled out with (and the box holding those weights, kept alive for re-submissions)."""

    iteration: int
    shards: list[list[dict[str, Any]]]
    version: int
    box: list[Any]
    pending: dict[Any, int] = field(default_factory=dict)  # ObjectRef -> shard
    round: int = 0  # dynamic sampling's extra rollouts of the iteration (0 = its own): part of the seed


def split_shards(samples: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    """Contiguous, near-equal shards (the first ones one longer), in order; some may be empty."""
    size, extra = divmod(len(samples), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(samples[start:end])
        start = end
    return out


class RayTrainer:
    """The `TrainingBackend` over Ray actors: `train_step`, `evaluate`, `save`, `fit`, `close`.

    `after_submit(iteration)`, if given, is called once the iteration's rollout tasks are
    submitted and before they are gathered (tests use it to kill a worker mid-iteration).
    `allow_cpu_fsdp`: tests only, `train.fsdp` over gloo on CPU (refused to users).
    """

    def __init__(self, run: Any, sink: MetricsSink | None = None,
                 after_submit: Callable[[int], None] | None = None, allow_cpu_fsdp: bool = False):
        """`run`: the run's picklable spec (`ray_actors.RunHandle`: `Run.spec()`, agent_r1/runs/run.py)."""
        import ray

        from agent_r1.training.ray_actors import RolloutWorker

        cfg = run.cfg
        self.cfg, self.sink, self.after_submit = cfg, sink, after_submit
        rc = cfg.ray
        self._owns_ray = init_ray(rc)
        self.learners = LearnerGroup(cfg)
        self.workers: list[Any] = []
        try:
            self.learners.start(run, allow_cpu_fsdp)
            info = self.learners.info
            self.iteration: int = info["iteration"]
            self.version: int = info["version"]
            self._snapshot_version = self.version  # the weights every worker is built with
            self.eval_samples: list[dict[str, Any]] = info["eval_samples"]
            self.resumed_from: str | None = info["resumed_from"]
            self._resumed_at = self.iteration
            self._shards_log: JsonlMetrics | None = None
            # a snapshot of the policy, held by the learner group for the trainer's lifetime so that Ray
            # can rebuild a restarted worker from it (constructor arguments must stay in scope: ray#53727)
            policy = self.learners.policy_ref
            threads = max(1, round(rc.cpus_per_worker))
            worker_cls = ray.remote(RolloutWorker).options(
                num_cpus=rc.cpus_per_worker, num_gpus=rc.gpus_per_worker,
                max_restarts=rc.max_restarts, max_task_retries=0,  # the driver re-submits, with fresh weights
                scheduling_strategy="SPREAD")  # one worker per node while nodes last: a node's loss costs fewer shards
            self.workers = [worker_cls.remote(run, info["index_dir"], policy, threads, info["precision"])
                            for _ in range(rc.num_workers)]
            ray.get([w.pid.remote() for w in self.workers])  # fail here, not mid-iteration
        except BaseException:
            self.close()
            raise
        self._weights: tuple[int, Any] = (self.version, None)  # (version, ObjectRef) in the object store
        self._tokenizer: Any = None
        self.worker_failures = 0
        self.last_trajectories: list[Trajectory] = []
        # per shard of the last iteration: shard, prompts, node_id, pid, attempts, died_on (nodes of failed attempts)
        self.last_shard_nodes: list[dict[str, Any]] = []
        self._worker_nodes: dict[int, str] = {}  # worker k -> the node its last shard ran on
        self.max_staleness = max_staleness(cfg)
        self._in_flight: deque[InFlight] = deque()  # submitted rollouts, oldest (the next to learn) first
        # per learned iteration: the weights version its rollout used, and the learner's version
        # (and wall-clock window, time.time()) of its update
        self.learn_log: list[dict[str, Any]] = []
        self.last_sampled_by = self.version  # the weights version of the last gathered batch

    def learner_weights(self) -> list[dict[str, Any]]:
        """Every rank's policy weights (the replicas should be equal); with FSDP, rank 0's full weights."""
        return self.learners.all_weights()

    # --- one iteration ------------------------------------------------------------------------
    def _weights_box(self) -> tuple[int, list[Any]]:
        """The current weights' ObjectRef, put once per learner version (never pulled into the driver)."""
        version, ref = self._weights
        if self.version == self._snapshot_version:  # every worker, restarted or not, already has these
            return self.version, [None]
        if ref is None or version != self.version:
            ref = self.learners.weights_ref()
            self._weights = (self.version, ref)
        return self.version, [ref]

    def rollout(self, samples: list[dict[str, Any]]) -> list[Trajectory]:
        """Rolls out `samples` over the workers; the trajectories come back in prompt order."""
        return self._gather(self._submit(samples, self.iteration))

    def _submit(self, samples: list[dict[str, Any]], iteration: int, round: int = 0) -> InFlight:
        """Submits iteration `iteration`'s shards with the learner's current weights (`round`: dynamic
        sampling's extra rollouts of the iteration)."""
        shards = split_shards(samples, len(self.workers))
        version, box = self._weights_box()
        job = InFlight(iteration, shards, version, box, round=round)
        for k, shard in enumerate(shards):
            if shard:
                job.pending[self.workers[k].rollout.remote(shard, iteration, k, version, box, round)] = k
        if self.after_submit is not None:
            self.after_submit(iteration)
        return job

    def _gather(self, job: InFlight) -> list[Trajectory]:
        """Waits for `job`'s shards; a shard whose worker died is rolled out again with the same
        seed and weights version. Trajectories in prompt order."""
        import ray
        from ray.exceptions import RayActorError

        shards, pending, version, box = job.shards, job.pending, job.version, job.box
        self.last_sampled_by = version
        results: dict[int, Any] = {}  # shard -> ShardResult
        retries = [0] * len(shards)
        died_on: dict[int, list[str]] = {}
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            k = pending.pop(ref)
            try:
                results[k] = ray.get(ref)
                self._worker_nodes[k] = results[k].node_id
            except RayActorError as err:  # the worker died (or is unreachable): roll its shard out again
                retries[k] += 1
                died_on.setdefault(k, []).append(self._worker_nodes.get(k, "unknown"))
                self.worker_failures += 1
                if retries[k] > self.cfg.ray.max_restarts:
                    raise RuntimeError(f"rollout worker {k} failed {retries[k]} times at iteration {job.iteration} "
                                       f"(last error: {err}); check the worker logs under the Ray temp dir, or "
                                       f"raise ray.max_restarts") from err
                log.warning("rollout worker %d died at iteration %d (%s); rolling its shard out again",
                            k, job.iteration, type(err).__name__)
                self._await_worker(k)
                pending[self.workers[k].rollout.remote(shards[k], job.iteration, k, version, box, job.round)] = k
        self.last_shard_nodes = [{"shard": k, "prompts": len(shards[k]), "node_id": r.node_id, "pid": r.pid,
                                  "attempts": retries[k] + 1, "died_on": died_on.get(k, []),
                                  "version": version, "started": r.started, "finished": r.finished,
                                  "weight_sync_s": r.weight_sync_s}
                                 for k, r in sorted(results.items())]
        return [t for k in range(len(shards)) for t in (results[k].trajectories if k in results else [])]

    def _await_worker(self, k: int) -> None:
        """Waits until Ray has restarted worker `k` (its constructor reloads the policy snapshot
        and reopens the index); a worker out of restarts raises."""
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError

        deadline = time.monotonic() + WORKER_RESTART_TIMEOUT_S
        while True:
            try:
                ray.get(self.workers[k].pid.remote(), timeout=30)
                return
            except ActorDiedError as err:
                raise RuntimeError(f"rollout worker {k} is dead and out of restarts (ray.max_restarts="
                                   f"{self.cfg.ray.max_restarts}): {err}") from err
            except (ActorUnavailableError, GetTimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"rollout worker {k} did not come back within {WORKER_RESTART_TIMEOUT_S} s; "
                                       "check the cluster's free CPUs/GPUs and the worker logs") from None
                time.sleep(0.2)

    def _next_batch(self) -> tuple[list[Trajectory], dict[str, float]]:
        """This iteration's trajectories (and dynamic sampling's metrics). Synchronous: draw, roll out,
        gather. Asynchronous: top the queue up to iterations i..i+k (never past train.iterations), then
        gather iteration i."""
        if self.max_staleness == 0:
            return self._fill(self.rollout(self.learners.next_prompts()))
        while not self._in_flight or (len(self._in_flight) <= self.max_staleness
                                      and self.iteration + len(self._in_flight) < self.cfg.train.iterations):
            samples = self.learners.next_prompts()
            self._in_flight.append(self._submit(samples, self.iteration + len(self._in_flight)))
        return self._fill(self._gather(self._in_flight.popleft()))

    def _fill(self, first: list[Trajectory]) -> tuple[list[Trajectory], dict[str, float]]:
        """`algo.dynamic_sampling` (training/trainer.py): extra rounds drawn from the learner's
        sampler and rolled out now, with the current weights (asynchronous too: each trajectory keeps its
        policy_version). `last_sampled_by` stays round 0's version; `last_shard_nodes` gets every round's."""
        sampled_by, shards = self.last_sampled_by, list(self.last_shard_nodes)

        def more(round: int) -> list[Trajectory]:
            trajs = self._gather(self._submit(self.learners.next_prompts(extra=True), self.iteration, round))
            shards.extend({**s, "round": round} for s in self.last_shard_nodes)
            return trajs

        trajs, metrics = fill_batch(self.cfg, first, more)
        self.last_sampled_by, self.last_shard_nodes = sampled_by, shards
        return trajs, metrics

    def train_step(self) -> dict[str, float]:
        """One iteration. `rollout_s` is the time the driver waited for the batch (all of the rollout
        when synchronous; what the update did not hide when asynchronous)."""
        t0 = time.perf_counter()
        trajs, dynamic = self._next_batch()
        rollout_s = time.perf_counter() - t0
        sampled_by, started = self.last_sampled_by, time.time()
        metrics, self.version = self.learners.learn(trajs, rollout_s)
        metrics.update(dynamic)
        self.learn_log.append({"iteration": self.iteration, "sampled_by": sampled_by, "learned_at": self.version - 1,
                               "started": started, "finished": time.time(), "in_flight": len(self._in_flight)})
        self.iteration += 1
        self.last_trajectories = trajs
        every = self.cfg.train.log_trajectories_every
        if every and self.iteration % every == 0 and hasattr(self.sink, "log_trajectories"):
            self.sink.log_trajectories(self.iteration, trajs, self.tokenizer)
        metrics["ray/workers"] = float(len(self.workers))
        metrics["ray/worker_failures"] = float(self.worker_failures)
        metrics["ray/nodes_used"] = float(len({s["node_id"] for s in self.last_shard_nodes}))
        metrics["async/in_flight"] = float(len(self._in_flight))
        syncs = [s.get("weight_sync_s", 0.0) for s in self.last_shard_nodes]
        if any(syncs):  # engines with their own weights (vLLM): the slowest worker's sync this iteration
            metrics["rollout/weight_sync_s"] = max(syncs)
        self._record_shards()
        return metrics

    def _record_shards(self) -> None:
        """Appends where this iteration's shards ran to `<train.out_dir>/ray_shards.jsonl`; `step` is
        the step of the iteration's line in metrics.jsonl. On resume, lines after the checkpoint are
        dropped first (those iterations run again), as metrics.jsonl does."""
        if not self.cfg.train.out_dir:
            return
        if self._shards_log is None:
            self._shards_log = JsonlMetrics(Path(self.cfg.train.out_dir) / SHARDS_FILE,
                                            resume_from_step=self._resumed_at + 1 if self.resumed_from else None)
        self._shards_log.log(self.iteration, {"shards": self.last_shard_nodes})

    # --- the rest of the TrainingBackend ---------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = self.learners.tokenizer()
        return self._tokenizer

    def evaluate(self, greedy: bool = True) -> dict[str, float]:
        return self.learners.evaluate(greedy)

    def save(self) -> Path:
        return Path(self.learners.save())

    def fit(self, on_iteration: Any = None) -> dict[str, float]:
        return fit_loop(self, on_iteration)

    def _log(self, step: int, metrics: dict[str, float]) -> None:
        log_finite(self.sink, step, metrics)

    def worker_pids(self) -> list[int]:
        import ray

        return ray.get([w.pid.remote() for w in self.workers])

    def close(self) -> None:
        """Stops the actors (each worker first ends what it started: MCP servers, vLLM's engine core), and
        Ray itself if this trainer started it."""
        import ray

        close_actors(self.workers)
        self.workers = []
        self.learners.close()
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False

    def __enter__(self) -> "RayTrainer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
