"""`env.kind: openai_agent`: the rollout of a user's agent function, trained through the endpoint.

`env.agent: "package.module:function"` names a function written against the OpenAI API only:

    def agent(client: openai.OpenAI, sample: dict) -> float | str: ...
    async def agent(client: openai.AsyncOpenAI, sample: dict) -> float | str: ...   # awaited
    def agent(client, sample, tools) -> float | str: ...   # env.mcp_servers: the run's MCP tools (agent_tools.py)

`client` is an unmodified `openai` client pointed at the endpoint (`base_url`) with the session key as
its API key, so every call it makes is one session's, recorded token for token. `sample` is the data
row (a copy). The function runs any harness and returns the session's reward (a number) or its answer
(a string, scored by the run's `reward.metric` against the row's `answers`).

Per rollout: `n_samples` sessions per prompt run concurrently (at most `env.agent_concurrency` at once;
each in a daemon thread of its own, a coroutine on its own event loop there: session_runner.py), each
within `env.agent_timeout_s`.
A session's records become steps (assemble.py); every step gets the session's outcome and the prompt's
`sample_id` and the session's `session_id`, so a group estimator (GRPO) compares the prompt's n sessions
as one group, each session once whatever its number of steps (algos/advantages.py, as SkyRL's step-wise
training: the session's advantage on every one of its steps).
An agent that raises, times out or returns something else: its session keeps the steps it sampled with
reward 0 (its failure may be the policy's doing, e.g. arguments its harness cannot read) and counts in
`agent/errors`; a session without calls is dropped (`agent/empty`). Counts travel on each session's
first step (`agent/count/*`) to the iteration's metrics (assemble.agent_metrics).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from agent_r1.agents.assemble import assign_outcome, build_trajectories
from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.agents.session_runner import Running, run_sessions
from agent_r1.sampling import SESSION_SEED_STRIDE, mix_seed
from agent_r1.trajectory import Trajectory

log = logging.getLogger(__name__)


def session_reward(value: Any, sample: dict[str, Any], reward: Any) -> tuple[float, str | None, str]:
    """(reward, answer, error) of what an agent returned: a number is the reward, a string the answer,
    scored by the row's own reward settings (its `env.reward`, as the built-in env scores the row) on
    top of the run's `reward`."""
    from agent_r1.rewards.scoring import outcome_reward

    if isinstance(value, str):
        return outcome_reward(value, sample.get("answers") or [], row_reward(sample, reward)), value, ""
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value), None, ""
    return 0.0, None, f"returned {type(value).__name__} {value!r:.80}; return a finite number (the reward) or a str"


def row_reward(sample: dict[str, Any], reward: Any) -> Any:
    """The run's reward config with the row's `env.reward` applied; a bad one is a ValueError naming
    the row and the key."""
    env = sample.get("env")
    if not isinstance(env, dict) or not env.get("reward"):
        return reward
    from agent_r1.envs.tool_env import check_sample_env

    return check_sample_env({"reward": env["reward"]}, None, reward, where=f"sample {sample.get('id', '?')!r}: env")[1]


def caller_autocast() -> Callable[[], Any] | None:
    """A factory of the calling thread's torch autocast (the trainer's bf16), or None when it has none:
    the endpoint generates in its own thread, where the trainer's autocast (thread-local) does not hold."""
    import torch

    for device in ("cuda", "cpu"):
        if torch.is_autocast_enabled(device):
            dtype = torch.get_autocast_dtype(device)
            return lambda: torch.autocast(device_type=device, dtype=dtype)
    return None


class AgentRollout:
    """The `make_env` of `env.kind: openai_agent`: no per-sample env; `run_rollout` (the rollout loop
    dispatches to it) runs the agent sessions against an endpoint over the trainer's engine. The
    endpoint is started on first use and kept for the run (restarted when the engine or the sampling
    changes: greedy evaluation); `close()` stops it."""

    def __init__(self, agent: Callable[..., Any], concurrency: int = 64, timeout_s: float = 600.0,
                 tools: Any = None, connections: list[Any] | None = None):
        self.agent, self.concurrency, self.timeout_s = agent, concurrency, timeout_s
        # env.mcp_servers: the tools handed to an agent that takes them (agent_tools.py), and their
        # connections, which this factory owns and ends in `close()`
        self.tools, self.connections = tools, list(connections or [])
        self.endpoint: Endpoint | None = None
        self.last_sessions: list[tuple[dict[str, Any], list[Any], list[Trajectory]]] = []  # the last rollout's

    def __call__(self, sample: dict[str, Any]) -> Any:
        raise TypeError("env.kind=openai_agent has no per-sample env: the agent function (env.agent) is the env; "
                        "the rollout runs it through the endpoint")

    def _endpoint(self, engine: Any, codec: Any, config: Any, greedy: bool) -> Endpoint:
        # room for every session's connections (a session may make calls at once): only idle ones are
        # closed at the cap, but a newcomer is refused when all are busy
        want = EndpointConfig.from_rollout(config, max_connections=max(256, 4 * self.concurrency),
                                           **({"temperature": 0.0} if greedy else {}))
        ep = self.endpoint
        if ep is None or ep.engine is not engine or ep.config != want:
            self._stop_endpoint()  # the MCP connections stay: they are the run's
            self.endpoint = ep = Endpoint(engine, codec.tokenizer, want).start()
        return ep

    def run_rollout(self, engine: Any, codec: Any, samples: list[dict[str, Any]], config: Any, reward: Any,
                    seed: int | None = None, greedy: bool = False) -> list[Trajectory]:
        """`n_samples` sessions per sample -> their steps, grouped by sample (run_rollout's shape). With
        `seed` (the trainer's rollout seed), session j of the rollout samples from (seed, j) and its k-th
        call from (that, k): an agent that calls one call at a time gets the same tokens again, up to the
        float rounding of the batches its calls share (an agent's own randomness is its own)."""
        start = time.perf_counter()
        ep = self._endpoint(engine, codec, config, greedy)
        batcher = ep.batcher
        batcher.context = caller_autocast()  # generate at the trainer's precision, as the built-in rollout
        batcher.running = running = Running()  # a batch waits for every running session's call
        first_call = len(batcher.batch_sizes)
        jobs = [(sample, ep.open_session(seed=None if seed is None else mix_seed(seed, j, SESSION_SEED_STRIDE)))
                for j, sample in enumerate(s for s in samples for _ in range(config.n_samples))]
        try:
            results = run_sessions(self.agent, ep.base_url, jobs, self.concurrency, self.timeout_s,
                                   {} if self.tools is None else {"tools": self.tools}, running)
        finally:
            batcher.running = None
            records = [ep.close_session(key) for _, key in jobs]
        trajs: list[Trajectory] = []
        self.last_sessions, empty, empty_errors, errors, first_error = [], 0, 0, 0, ""
        for j, ((sample, _), res, calls) in enumerate(zip(jobs, results, records)):
            value, answer, error = 0.0, None, res.error
            if not error:
                value, answer, error = session_reward(res.value, sample, reward)
            errors += bool(error)
            first_error = first_error or error
            if not calls:
                empty += 1
                empty_errors += bool(error)
                continue
            steps, stats = build_trajectories(calls, str(sample["id"]), sample, decode=codec.decode,
                                              session_id=f"{sample['id']}/{j}",  # never the session's key
                                              turn_close_ids=ep.stop_ids)
            assign_outcome(steps, 0.0 if error else value, answer)
            counts = {**vars(stats), "sessions": 1, "errors": int(bool(error))}
            steps[0].metrics.update({f"agent/count/{k}": float(v) for k, v in counts.items()})
            for step in steps:
                step.stop_reason = "agent_error" if error else "agent"
            self.last_sessions.append((sample, calls, steps))
            trajs += steps
        if errors:
            log.warning("%d of %d agent sessions failed (reward 0; dropped when they made no call); the first: %s",
                        errors, len(jobs), first_error)
        if not trajs:
            raise RuntimeError(f"none of the {len(jobs)} agent sessions called the endpoint (env.agent); "
                               f"the first failure: {first_error or 'the agent returned without a call'}")
        trajs[0].metrics["agent/count/empty"] = float(empty)
        # where the rollout's seconds went: the engine's share, the rest is HTTP, rendering and the agents
        trajs[0].metrics["agent/count/engine_calls"] = float(len(batcher.batch_sizes) - first_call)
        trajs[0].metrics["agent/count/engine_s"] = float(sum(batcher.engine_seconds[first_call:]))
        trajs[0].metrics["agent/count/errors"] += empty_errors  # the dropped sessions' failures count too
        elapsed = time.perf_counter() - start
        for traj in trajs:
            traj.metrics["rollout_seconds"] = elapsed
        return trajs

    def _stop_endpoint(self) -> None:
        if self.endpoint is not None:
            self.endpoint.stop()
            self.endpoint = None

    def close(self) -> None:
        """Stops the endpoint and ends the MCP servers' connections; closing twice is harmless."""
        self._stop_endpoint()
        connections, self.connections = self.connections, []
        for conn in connections:
            conn.close()
