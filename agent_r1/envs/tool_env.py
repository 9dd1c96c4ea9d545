"""ToolEnv: a question-answering episode where the model may call tools before answering.

Stepping is split in two so the rollout can batch tool calls of all trajectories in a turn:
`plan(action)` parses, the shared `ToolRunner` executes, `finish(...)` builds the observation.
`step(action)` does all three for one env.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_r1.envs.base import StepOutput
from agent_r1.envs.formats import ParsedAction, ToolCallFormat
from agent_r1.rewards.scoring import RewardConfig, step_process_reward
from agent_r1.tools.base import ToolResult, tool_schema
from agent_r1.tools.mcp_tools import McpServerConfig
from agent_r1.tools.runner import ToolCall, ToolRunner


@dataclass
class EnvConfig:
    kind: str = "tool"  # the registered environment a run uses (envs/factory.py ENVS): tool = ToolEnv
    format: str = "tag"  # tag | hermes (envs/formats.py FORMATS)
    max_calls_per_turn: int = 4
    system_prompt: str = ""  # extra instructions prepended to the format's own
    format_instructions: bool = True  # False: tiny local models learn the format from demos alone
    tools: list[str] = field(default_factory=lambda: ["search"])  # registered tool names (tools/registry.py)
    tool_args: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool name -> its factory's keyword args
    # MCP servers whose tools env.tools may name (tools/mcp_tools.py); never set by a sample: a data row
    # must not start a command or reach a URL
    mcp_servers: list[McpServerConfig] = field(default_factory=list)
    # kind openai_agent (agents/rollout.py): the agent function, 'package.module:function', and how many of
    # its sessions run at once and for how long each may run
    agent: str = ""
    agent_concurrency: int = 64
    agent_timeout_s: float = 600.0


# What a dataset row's "env" mapping may set for its own episode (the format is fixed per run:
# the rollout stops generation on its tags for the whole batch).
SAMPLE_ENV_KEYS = ("tools", "max_calls_per_turn", "system_prompt", "format_instructions", "reward")


def _at_most(mine: Any, run: Any) -> bool:
    return mine <= run


def _at_least(mine: Any, run: Any) -> bool:
    return mine >= run


def _no_more_lenient(mine: str, run: str) -> bool:
    from agent_r1.rewards.scoring import metric_leniency

    return metric_leniency(mine) <= metric_leniency(run)


# What "tighten" means for each setting a sample may give, (section, key) -> (rule, how it reads): a
# budget or a reward may go down, process rewards may be switched off (never on, e.g. in an ablation
# run), the format and overlong penalties may get harsher, the metric may get stricter (rewards/scoring.py
# MetricTraits.leniency); tools may only narrow (checked apart). system_prompt and format_instructions
# change no limit; their text has the schema's ceiling (schema.TEXT_LIMITS).
SAMPLE_TIGHTEN: dict[tuple[str, str], tuple[Any, str]] = {
    ("env", "max_calls_per_turn"): (_at_most, "above"),
    ("reward", "max_process_reward"): (_at_most, "above"),
    ("reward", "valid_call_reward"): (_at_most, "above"),
    ("reward", "retrieval_hit_reward"): (_at_most, "above"),
    ("reward", "format_penalty"): (_at_most, "above (a milder penalty than)"),
    ("reward", "process_reward"): (_at_most, "on where the run has it off:"),
    ("reward", "metric"): (_no_more_lenient, "a more lenient answer metric than"),
    ("reward", "overlong_buffer"): (_at_least, "below (a narrower length penalty than)"),
    ("reward", "overlong_penalty"): (_at_least, "below (a milder length penalty than)"),
}


def check_sample_env(overrides: Any, env: EnvConfig | None = None, reward: RewardConfig | None = None,
                     where: str = "env", serves_tools: bool = True) -> tuple[EnvConfig, RewardConfig]:
    """The run's env and reward configs with a sample's `env` mapping applied, typed and range-checked
    with the run's own schema (config.py: the same coercion, so "2" is read as 2 as `--set` does, and
    the same LIMITS and TEXT_LIMITS). With the run's `env`/`reward` given, a sample may also only tighten
    the run's settings (SAMPLE_TIGHTEN, env.tools); without them (data loaded on its own) the defaults stand in
    and only types and ranges are checked. Errors are ValueErrors naming `where` + key.

    `serves_tools` is the run's env kind's trait (envs/factory.py `kind_traits`), handed in by the caller
    because the factory builds this env: False (openai_agent, whose agent brings its own tools) lets a
    row name tools that env.tools does not list.
    """
    from agent_r1.schema import build_section, check_limits

    if not isinstance(overrides, dict):
        raise ValueError(f"{where} must be a mapping of settings, got {type(overrides).__name__}")
    overrides = dict(overrides)
    unknown = sorted(map(str, set(overrides) - set(SAMPLE_ENV_KEYS)))
    if unknown:
        fixed = " (the tool-call format is set per run by env.format)" if "format" in unknown else ""
        raise ValueError(f"{where} has unknown key(s) {unknown}{fixed}; a sample may set {list(SAMPLE_ENV_KEYS)}")
    tools = overrides.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ValueError(f"{where}.tools must be a list of tool names, got {str(tools)[:80]}")
    reward_overrides = overrides.pop("reward", None) or {}
    if not isinstance(reward_overrides, dict):
        raise ValueError(f"{where}.reward must be a mapping of reward settings, got {type(reward_overrides).__name__}")
    run_env, run_reward = env or EnvConfig(), reward or RewardConfig()
    new_env = build_section(EnvConfig, overrides, f"{where}.", run_env)
    new_reward = build_section(RewardConfig, reward_overrides, f"{where}.reward.", run_reward)
    check_limits(new_env, "env", label=where)
    check_limits(new_reward, "reward", label=f"{where}.reward")
    if env is None:
        return new_env, new_reward
    # a kind whose agent brings its own tools (openai_agent) offers none of env.tools: a row names the agent's
    missing = [t for t in new_env.tools if t not in env.tools] if serves_tools else []
    if missing:
        raise ValueError(f"{where}.tools asks for {missing}, which the run does not provide (env.tools = "
                         f"{env.tools}); add them, e.g. --set env.tools=[{','.join(env.tools + missing)}]")
    for (section, key), (tightens, says) in SAMPLE_TIGHTEN.items():
        mine, run = (new_env, env) if section == "env" else (new_reward, run_reward)
        if not tightens(getattr(mine, key), getattr(run, key)):
            label = where if section == "env" else f"{where}.reward"
            raise ValueError(f"{label}.{key}={getattr(mine, key)!r} is {says} the run's {section}.{key}="
                             f"{getattr(run, key)!r}: a sample may tighten the run's settings, never loosen them")
    return new_env, new_reward


def sample_env_config(sample: dict[str, Any], env: EnvConfig, reward: RewardConfig,
                      serves_tools: bool = True) -> tuple[EnvConfig, RewardConfig]:
    """The run's env and reward configs with the sample's own `env` settings applied (see check_sample_env,
    which `serves_tools` is handed on to).

    `sample["env"]` e.g. {"tools": ["calculator"], "max_calls_per_turn": 2, "reward": {"metric": "numeric"}}.
    """
    overrides = sample.get("env")
    if not overrides:
        return env, reward
    return check_sample_env(overrides, env, reward, where=f"sample {sample.get('id', '?')!r}: env",
                            serves_tools=serves_tools)


@dataclass
class PendingStep:
    parsed: ParsedAction
    valid: list[int] = field(default_factory=list)  # indices of calls that will run


class ToolEnv:
    def __init__(self, runner: ToolRunner, fmt: ToolCallFormat, config: EnvConfig, reward: RewardConfig):
        self.runner = runner
        self.fmt = fmt
        self.config = config
        self.reward_config = reward
        self.sample: dict[str, Any] = {}
        self._supports: set[str] = set()
        self._found: set[str] = set()

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(t) for t in self.runner.tools.values()]

    def reset(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        self.sample = sample
        self._supports = set(sample.get("supporting_titles") or [])
        self._found = set()
        howto = self.fmt.instructions(list(self.runner.tools)) if self.config.format_instructions else ""
        system = " ".join(filter(None, [self.config.system_prompt, howto]))
        return [{"role": "system", "content": system}, {"role": "user", "content": sample["question"]}]

    def plan(self, action_text: str) -> PendingStep:
        try:
            parsed = self.fmt.parse(action_text, self.config.max_calls_per_turn)
        except Exception as exc:  # noqa: BLE001  (any format, even a custom one: never raise on model output)
            parsed = ParsedAction(error=f"the action could not be parsed ({type(exc).__name__}: {str(exc)[:80]})")
        valid = []
        for i, call in enumerate(parsed.calls):
            try:
                ok = self.runner.validate(call) is None
            except Exception as exc:  # noqa: BLE001  (e.g. a schema validator recursing on odd arguments)
                call.error, ok = f"arguments could not be checked ({type(exc).__name__})", False
            if ok:
                valid.append(i)
        return PendingStep(parsed=parsed, valid=valid)

    def finish(self, pending: PendingStep, results: list[ToolResult]) -> StepOutput:
        """`results` has one entry per call in `pending.parsed.calls` (invalid ones included)."""
        parsed = pending.parsed
        if parsed.answer is not None:
            return StepOutput(observation=None, reward=0.0, done=True, answer=parsed.answer,
                              info={"tool_calls": 0, "valid_tool_calls": 0})
        texts = [r.text for r in results]
        per_tool: dict[str, dict[str, float]] = {}
        for call, r in zip(parsed.calls, results):
            stat = per_tool.setdefault(call.name if call.name in self.runner.tools else "<invalid>",
                                       {"calls": 0, "failures": 0, "seconds": 0.0})
            stat["calls"] += 1
            stat["failures"] += 0 if r.success else 1
            stat["seconds"] += float(r.metadata.get("seconds", 0.0))
        if parsed.error:
            texts.append(f"Error: {parsed.error}")
        succeeded = [r for r in results if r.success]
        titles = [t for r in succeeded for t in r.metadata.get("titles", [])]
        reward = step_process_reward(len(succeeded), titles, self._supports, self._found, self.reward_config)
        info = {
            "tool_calls": len(parsed.calls),
            "valid_tool_calls": len(succeeded),
            "errors": [r.metadata.get("error", "tool") for r in results if not r.success]
            + (["parse"] if parsed.error else []),
            "retrieved_titles": titles,
            "tools": per_tool,  # per tool: calls, failures, seconds (summed by tools.runner.tool_metrics)
            "calls": [call_record(call, r) for call, r in zip(parsed.calls, results)],  # for traces
        }
        if parsed.error:
            info["parse_error"] = parsed.error
        return StepOutput(observation=self.fmt.wrap_observation(texts), reward=reward, done=False, info=info)

    def step(self, action_text: str) -> StepOutput:
        pending = self.plan(action_text)
        return self.finish(pending, self.runner.run(pending.parsed.calls))

    def close(self) -> None:
        pass


def call_record(call: ToolCall, result: ToolResult) -> dict[str, Any]:
    """One executed (or refused) call as a small JSON-able dict: name, arguments, ok, error (what the
    model was told), latency_ms (measured by the runner; a batch's time is shared by its calls) and
    titles (the documents a search returned)."""
    return {"name": str(call.name), "arguments": call.arguments if isinstance(call.arguments, dict) else {},
            "ok": bool(result.success), "error": None if result.success else result.text[:500],
            "latency_ms": 1000.0 * float(result.metadata.get("seconds", 0.0)),
            "titles": [str(t) for t in result.metadata.get("titles", [])]}


def step_many(envs: list[Any], actions: list[str]) -> list[StepOutput]:
    """Steps several envs, running all their tool calls through each shared runner at once. An env
    without `plan` (any `AgentEnv` of a registered env kind) is stepped on its own with `step`."""
    outputs: list[StepOutput | None] = [None] * len(envs)
    planned = [i for i, env in enumerate(envs) if hasattr(env, "plan")]
    for i, env in enumerate(envs):
        if not hasattr(env, "plan"):
            outputs[i] = env.step(actions[i])
    pendings = {i: envs[i].plan(actions[i]) for i in planned}
    by_runner: dict[int, list[int]] = {}
    for i in planned:
        by_runner.setdefault(id(envs[i].runner), []).append(i)
    results: dict[int, list[ToolResult]] = {i: [] for i in planned}
    for idxs in by_runner.values():
        runner = envs[idxs[0]].runner
        flat = [(i, c) for i in idxs for c in pendings[i].parsed.calls]
        outs = runner.run([c for _, c in flat]) if flat else []
        for (i, _), res in zip(flat, outs):
            results[i].append(res)
    for i in planned:
        outputs[i] = envs[i].finish(pendings[i], results[i])
    return outputs  # type: ignore[return-value]
