"""The SFT warm start of an `env.kind: openai_agent` run, played through the agent itself.

The built-in env's demos are rendered with the built-in env's system prompt, tool schemas and tool
results; an agent sends its own (a developer message, a schema of its own, its tools' own answers,
a final-answer step), so a warm start made from them learns a prompt the agent never sends. Here
the agent function runs, unchanged, against the endpoint over a scripted policy instead of the model:
the policy writes the row's `plan` (each step a call to the agent's tool, filling the tool's one
required string parameter, as the agent's request lists it) and then the answer, or answers by a
guess in `guess_fraction` of the sessions (demos.py's draw). What the endpoint records is
what the agent's policy will see and sample, token for token: the demos are those trajectories.

    demos, stats = agent_demos(agent, samples, codec, rollout_cfg, reward_cfg, guess_fraction=0.6, seed=0)
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from agent_r1.agents.endpoint import Endpoint, EndpointConfig
from agent_r1.agents.rollout import AgentRollout
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.training.demos import chat_turn, copy_spelling, demo_guesses, scripted_actions
from agent_r1.trajectory import Trajectory


@dataclass
class _Session:
    sample: dict[str, Any]
    guess: str | None
    calls: int = 0
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None


def string_arguments(tools: list[dict[str, Any]] | None) -> dict[str, str]:
    """{tool name: its one required string parameter} for the request's function tools that have one."""
    out = {}
    for tool in tools or []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        strings = [k for k in params.get("required", list(props)) if (props.get(k) or {}).get("type") == "string"]
        if isinstance(fn.get("name"), str) and len(strings) == 1:
            out[fn["name"]] = strings[0]
    return out


class ScriptedPolicy:
    """A generation engine that writes each session's scripted actions: the k-th call of a session gets
    its k-th action (the answer once the plan is done, or when the request asks for no tool), as the
    tokenizer's chat template writes an assistant turn, cut at the caller's stop ids and budget. The
    session is the batcher's prefix key (hence `supports_prefix_reuse`)."""

    supports_prefix_reuse = True

    def __init__(self, codec: Any):
        self.codec = codec
        self.sessions: dict[str, _Session] = {}
        self.lock = threading.Lock()
        self.turn = partial(chat_turn, codec.tokenizer)

    def drop_prefixes(self, keys: list[Any]) -> None:
        pass

    def action(self, key: str, prompt: list[int]) -> str:
        with self.lock:
            s = self.sessions[key]
            k, s.calls = s.calls, s.calls + 1
        offered = string_arguments(s.tools) if s.tool_choice != "none" else {}
        own = [t for t in ((s.sample.get("env") or {}).get("tools") or []) if t in offered]
        tool = (own or list(offered) or [None])[0]
        sample = {**s.sample, "env": {**(s.sample.get("env") or {}), "tools": [tool] if tool else []}}
        if tool is None:  # no tool to call (or none allowed): the answer
            sample["plan"] = []
        spell = partial(copy_spelling, context=self.codec.decode(prompt))
        actions = scripted_actions(sample, "hermes", s.guess, {tool: offered[tool]} if tool else {}, self.turn, spell)
        return actions[min(k, len(actions) - 1)]

    def generate(self, prompts: list[list[int]], params: Any, prefix_keys: list[Any] | None = None,
                 **_: Any) -> list[GenerationOutput]:
        budgets = params.max_new_tokens if isinstance(params.max_new_tokens, list) else [params.max_new_tokens] * len(prompts)
        outs = []
        for prompt, key, budget in zip(prompts, prefix_keys or [None] * len(prompts), budgets):
            ids, out = self.codec.encode(self.action(key, prompt)), []
            for i in ids:
                out.append(i)
                if i in params.stop_token_ids:
                    break
            finish = "stop" if out and out[-1] in params.stop_token_ids else "length"
            if len(out) > budget:
                out, finish = out[:budget], "length"
            outs.append(GenerationOutput(out, [0.0] * len(out), finish))
        return outs


class _RecordingEndpoint(Endpoint):
    """The endpoint, telling the scripted policy each call's tools (the agent's own schemas)."""

    def _prepare(self, session: str, body: Any) -> Any:
        prepared = super()._prepare(session, body)
        req = prepared[0]
        s = self.engine.sessions[session]  # type: ignore[attr-defined]
        s.tools, s.tool_choice = list(req.tools or []), req.tool_choice
        return prepared


class _PlayedRollout(AgentRollout):
    def _endpoint(self, engine: Any, codec: Any, config: Any, greedy: bool) -> Endpoint:
        want = EndpointConfig.from_rollout(config, max_connections=max(256, 4 * self.concurrency), temperature=0.0)
        if self.endpoint is None:
            self.endpoint = _RecordingEndpoint(engine, codec.tokenizer, want).start()
        return self.endpoint


def _bound(agent: Callable[..., Any], policy: ScriptedPolicy, guesses: dict[str, str | None]) -> Callable[..., Any]:
    """The agent, first telling the policy which row its session (the client's API key) plays."""

    def bind(client: Any, sample: dict[str, Any]) -> None:
        with policy.lock:
            policy.sessions[client.api_key] = _Session(sample, guesses[str(sample["id"])])

    if inspect.iscoroutinefunction(agent):
        async def played_async(client: Any, sample: dict[str, Any], **kwargs: Any) -> Any:
            bind(client, sample)
            return await agent(client, sample, **kwargs)
        return played_async

    def played(client: Any, sample: dict[str, Any], **kwargs: Any) -> Any:  # kwargs: `tools` (env.mcp_servers)
        bind(client, sample)
        return agent(client, sample, **kwargs)
    return played


@dataclass
class PlayedStats:
    sessions: int = 0
    failed: int = 0  # sessions whose agent raised or timed out: left out
    steps: int = 0
    drift: int = 0  # calls that started a new step (the agent edited its history)
    solved: int = 0  # sessions the agent's answer scored > 0

    def line(self) -> str:
        return (f"{self.sessions} agent sessions played: {self.steps} demo trajectories ({self.drift} drift), "
                f"{self.failed} failed, {self.solved} answered right")


def agent_demos(agent: Callable[..., Any], samples: list[dict[str, Any]], codec: Any, rollout: Any, reward: Any,
                guess_fraction: float, seed: int, concurrency: int = 64, timeout_s: float = 600.0,
                tools: Any = None, connections: list[Any] | None = None) -> tuple[list[Trajectory], PlayedStats]:
    """One demo session per sample, the agent run against the scripted policy (module docstring): the
    trajectories its calls make (a session the agent edited may be several steps), and counts. Sessions
    whose agent failed are left out; none succeeding is an error naming the first failure. `tools` and
    `connections`: the run's MCP tools for an agent that takes them (envs/factory.py agent_mcp_tools),
    ended here with the sessions."""
    guesses = dict(zip((str(s["id"]) for s in samples), demo_guesses(samples, guess_fraction, seed)))
    policy = ScriptedPolicy(codec)
    runner = _PlayedRollout(_bound(agent, policy, guesses), concurrency, timeout_s, tools, connections)
    try:
        steps = runner.run_rollout(policy, codec, samples, replace(rollout, n_samples=1), reward, greedy=True)
        sessions = runner.last_sessions
    finally:
        runner.close()
    stats = PlayedStats(sessions=len(samples))
    demos = []
    for _sample, _records, session_steps in sessions:
        if any(t.stop_reason == "agent_error" for t in session_steps):
            stats.failed += 1
            continue
        demos += session_steps
        stats.steps += len(session_steps)
        stats.drift += len(session_steps) - 1
        stats.solved += session_steps[-1].outcome_reward > 0
    stats.failed += len(samples) - len(sessions)  # sessions without a call were dropped by the rollout
    if not demos:
        raise RuntimeError(f"no agent session made a demo: {stats.line()}")
    del steps
    return demos, stats
