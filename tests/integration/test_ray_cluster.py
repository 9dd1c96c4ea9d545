"""A real two-node Ray cluster on one machine: two `ray start` processes (a head and a second
node, each its own raylet), the way infra/ray/start-two-nodes.sh starts them.

1. `agent-r1 train` (the CLI, in a subprocess) joins the cluster with `ray.address` and 2 rollout
   workers for 2 iterations: the workers land on different nodes, and every iteration's shards ran
   on both (`<run>/ray_shards.jsonl`, the metric `ray/nodes_used`).
2. A driver in this process joins the same cluster, and the second node is killed (its `ray start`
   process group and the workers it spawned, SIGKILL: all gone at once) while the second iteration's
   shards roll out: that node's shard is rolled out again on the head, every prompt exactly once. The
   node is frozen (SIGSTOP) from the end of the first iteration, so its shard cannot finish before the
   kill lands (a one-prompt shard once did, and the node was seen in both iterations).

Only the processes this module started are stopped, by their own pids; `ray stop` (which stops
every Ray on the machine) is never called.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import stop_local_ray
from tests.pipeline_helpers import write_micro_params
from tests.servers import free_port

pytestmark = pytest.mark.slow

RAY = str(Path(sys.executable).parent / "ray")
AGENT_R1 = str(Path(sys.executable).parent / "agent-r1")
HEAD_CPUS = 3  # learner + 2 workers: the head alone must hold the run once the second node is gone
NODE_CPUS = 1
ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_worker_niceness": "0",
       # the GCS declares a silent node dead after ~3 s instead of ~15 s (the default 3 s x 5 checks)
       "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
       "RAY_health_check_failure_threshold": "3"}


@dataclass
class Cluster:
    address: str
    temp_dir: str
    logs: Path
    nodes: dict[str, subprocess.Popen] = field(default_factory=dict)
    tree: dict[str, set[int]] = field(default_factory=dict)  # every pid each node's `ray start` spawned

    def start(self, name: str, *args: str) -> None:
        log = (self.logs / f"{name}.log").open("w")
        # a session of its own: the node's processes are one process group, killed by its pid
        self.nodes[name] = subprocess.Popen([RAY, "start", "--block", "--node-ip-address=127.0.0.1",
                                             "--disable-usage-stats", *args], stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **ENV}, start_new_session=True)

    def connect(self, timeout: float = 120.0) -> None:
        """This process joins as a driver once the head answers (its GCS port open, then the trainer's
        own `init_ray` with `ray.address`): the module's node counts are read through it (`ray.nodes()`),
        not a `ray status` process per poll, each of which imported Ray's CLI for about 2 s of CPU."""
        from agent_r1.config import RayConfig
        from agent_r1.training.ray_trainer import init_ray

        host, port = self.address.split(":")
        deadline = time.monotonic() + timeout
        while True:
            self._check_running()
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                init_ray(RayConfig(address=self.address))
                return
            except (OSError, ConnectionError):
                assert time.monotonic() < deadline, f"the head at {self.address} did not answer in {timeout} s"
                time.sleep(0.25)

    def wait_nodes(self, n: int, timeout: float = 120.0) -> None:
        import ray

        deadline = time.monotonic() + timeout
        while sum(node["Alive"] for node in ray.nodes()) != n:
            self._check_running()
            assert time.monotonic() < deadline, f"the cluster did not reach {n} nodes in {timeout} s"
            time.sleep(0.25)

    def _check_running(self) -> None:
        for name, proc in self.nodes.items():
            assert proc.poll() is None, f"ray node {name} exited: {(self.logs / f'{name}.log').read_text()[-2000:]}"

    def remember_tree(self, name: str) -> None:
        """Workers are sessions of their own (the raylet spawns them so): find them through the tree."""
        try:
            kids = psutil.Process(self.nodes[name].pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        self.tree.setdefault(name, set()).update(p.pid for p in kids)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signals the node's process group and every worker it spawned (workers are sessions of
        their own, so the group signal alone leaves them running, able to finish a task)."""
        self.remember_tree(name)
        try:
            os.killpg(self.nodes[name].pid, sig)
        except ProcessLookupError:
            pass
        for pid in self.tree.get(name, ()):
            try:
                psutil.Process(pid).send_signal(sig)
            except psutil.Error:
                pass

    def stop(self) -> None:
        for name in self.nodes:
            self.kill(name, signal.SIGTERM)  # `ray start --block` stops its node on SIGTERM
        # a graceful stop, given 2 s (the head's once took the whole 15 s it was given): whatever is left
        # is killed below by the pids this cluster spawned, and the temp dir goes with the module
        deadline = time.monotonic() + 2
        for proc in self.nodes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for name, proc in self.nodes.items():
            self.kill(name)
            proc.wait(10)
            for pid in self.tree.get(name, ()):  # only pids this node's `ray start` spawned
                try:
                    psutil.Process(pid).kill()
                except psutil.Error:
                    pass


@pytest.fixture(scope="module")
def cluster():
    stop_local_ray()  # the other Ray modules' local Ray: this process connects to the cluster below instead
    # the head's temp dir holds Ray's sockets, whose paths must stay under 107 bytes
    temp = tempfile.mkdtemp(prefix="ar1c-", dir="/tmp")
    port = free_port()
    c = Cluster(address=f"127.0.0.1:{port}", temp_dir=temp, logs=Path(temp))
    with pytest.MonkeyPatch.context() as mp:
        for k, v in ENV.items():  # this process's driver connects as the nodes were started
            mp.setenv(k, v)
        try:
            c.start("head", "--head", f"--port={port}", f"--num-cpus={HEAD_CPUS}", f"--temp-dir={temp}",
                    "--include-dashboard=false", f"--dashboard-port={free_port()}")
            c.connect()
            c.wait_nodes(1)
            c.start("node2", f"--address={c.address}", f"--num-cpus={NODE_CPUS}")
            c.wait_nodes(2)
            for name in c.nodes:
                c.remember_tree(name)
            yield c
        finally:
            stop_local_ray()  # the driver's connection, before its cluster goes
            c.stop()
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    """The micro experiment (data and index under tmp), without a warm start (a fresh model)."""
    from agent_r1.config import load_config
    from agent_r1.runs.run import Run

    root = tmp_path_factory.mktemp("cluster")
    params = write_micro_params(root / "params.yaml", root)
    over = {"train.init_from": "", "train.eval_every": 0, "train.checkpoint_every": 2,
            "train.runs_dir": str(root / "runs"), "ray.num_workers": 2, "ray.cpus_per_worker": 1,
            "ray.learner_cpus": 1}
    Run(load_config(params, over)).index_dir
    return root, params, over


def _shard_lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "ray_shards.jsonl").read_text().splitlines()]


def test_cli_run_spreads_the_workers_over_both_nodes(cluster, micro):
    root, params, over = micro
    run = root / "runs" / "cli"
    sets = [f"{k}={v}" for k, v in {**over, "ray.enabled": "true", "ray.address": cluster.address,
                                    "train.out_dir": str(run)}.items()]
    args = [AGENT_R1, "train", "--params", str(params)] + [a for s in sets for a in ("--set", s)]
    done = subprocess.run(args, check=False, cwd=root, env={**os.environ, **ENV}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = _shard_lines(run)
    assert [ln["step"] for ln in lines] == [1, 2]
    for ln in lines:
        shards = ln["shards"]
        assert [s["prompts"] for s in shards] == [2, 1]  # 3 prompts a iteration, in 2 contiguous shards
        assert len({s["node_id"] for s in shards}) == 2  # one shard on each node
        assert all(s["attempts"] == 1 and s["died_on"] == [] for s in shards)
    metrics = [json.loads(m) for m in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if "ray/nodes_used" in m]
    assert [m["ray/nodes_used"] for m in trained] == [2.0, 2.0]
    assert all(m["ray/worker_failures"] == 0.0 for m in trained)
    assert json.loads((run / "run.json").read_text())["status"] == "finished"


def test_losing_a_node_mid_iteration_rolls_its_shard_out_again(cluster, micro):
    import ray

    from agent_r1.config import load_config
    from agent_r1.runs.run import Run
    from agent_r1.training.ray_trainer import RayTrainer
    from agent_r1.training.trainer import PromptSampler

    root, params, over = micro
    cfg = load_config(params, {**over, "ray.enabled": True, "ray.address": cluster.address,
                               "train.out_dir": str(root / "runs" / "fault")})
    cluster.remember_tree("node2")  # the actor workers it spawned since

    def kill_node2(iteration: int) -> None:
        if iteration == 1:  # shards submitted, none gathered: the node goes down under its shard
            cluster.kill("node2")

    steps = []
    with RayTrainer(Run(cfg).spec(), after_submit=kill_node2) as trainer:
        head = ray.get_runtime_context().get_node_id()  # the driver runs on the head's machine: its node
        for i in range(cfg.train.iterations):
            if i == 1:  # frozen until the kill: a one-prompt shard (~50 ms) could otherwise finish first
                cluster.kill("node2", signal.SIGSTOP)
            t0 = time.perf_counter()
            metrics = trainer.train_step()
            steps.append((metrics, trainer.last_trajectories, trainer.last_shard_nodes))
            print(f"iteration {len(steps) - 1}: {time.perf_counter() - t0:.1f} s, shards on "
                  f"{[(s['shard'], s['node_id'][:8], s['attempts']) for s in trainer.last_shard_nodes]}")
        # the GCS declares the killed node dead after its health checks fail (~3-6 s with ENV): the
        # two micro iterations can end sooner, so it is given until a deadline to say so
        deadline = time.monotonic() + 60
        while (alive := {n["NodeID"] for n in ray.nodes() if n["Alive"]}) != {head} and time.monotonic() < deadline:
            time.sleep(0.5)
        failures = trainer.worker_failures
    assert cluster.nodes["node2"].wait(30) is not None and alive == {head}

    (m0, _, shards0), (m1, _, shards1) = steps
    node2 = ({s["node_id"] for s in shards0} - {head}).pop()  # iteration 0 ran on both nodes
    assert m0["ray/nodes_used"] == 2.0 and m1["ray/nodes_used"] == 1.0
    lost = [s for s in shards1 if s["died_on"]]
    assert len(lost) == 1 and lost[0]["died_on"] == [node2] and lost[0]["attempts"] == 2
    assert all(s["node_id"] == head for s in shards1)  # rolled out again on the surviving node
    assert failures == 1 and m1["ray/worker_failures"] == 1.0
    sampler = PromptSampler(Run(cfg).samples("train"), cfg.seed)
    for metrics, trajs, _ in steps:  # nothing lost, nothing twice, in prompt order
        prompts = [str(s["id"]) for s in sampler.next_batch(cfg.train.prompts_per_iter)]
        assert Counter(t.sample_id for t in trajs) == {p: cfg.rollout.n_samples for p in prompts}
        assert [t.sample_id for t in trajs][::cfg.rollout.n_samples] == prompts
        assert len(trajs) == cfg.train.prompts_per_iter * cfg.rollout.n_samples
        assert metrics["policy_loss"] == metrics["policy_loss"]  # the update ran (not NaN)
    assert [ln["step"] for ln in _shard_lines(root / "runs" / "fault")] == [1, 2]
