"""The env factory of a run: `env.kind` chooses a registered environment (`ENVS`), which builds one
env per sample. `tool` (the default) is ToolEnv over the tools the config names.

Lives with the envs (it knows only tools, formats and a retriever handed in), so the trainer, the
evaluation harness and the run assembly (agent_r1/runs/) all build envs the same way.

An env kind is a builder `(cfg, retriever) -> make_env(sample)`, registered by name::

    @ENVS.register("my_env")
    def my_envs(cfg, retriever):
        fmt = get_format(cfg.env.format)  # the run's format: generation stops on its tags
        return lambda sample: MyEnv(fmt, sample)

and chosen with `env.kind: my_env` in params.yaml. What the rollout asks of an env is in envs/base.py.
A kind may declare traits (`EnvTraits`: whether it serves env.tools, keys it refuses, config
defaults, the config its SFT warm start is made with): `@ENVS.register("my_env", serves_tools=False)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from agent_r1.envs.agent_kind import agent_defaults, agent_warm_start
from agent_r1.registry import Registry

EnvBuilder = Callable[[Any, Any], Callable[[dict[str, Any]], Any]]  # (run config, retriever) -> make_env(sample)
Rows = Callable[[], list[dict[str, Any]]]  # the training rows, read only when a kind asks for them


@dataclass(frozen=True)
class EnvTraits:
    """What an env kind asks of the config, the rows and the warm start (read by config.py, samples.py,
    `tool_envs` below and runs/warm_start.py instead of naming kinds)."""
    # the kind's env offers env.tools, so a row's own tools may only narrow them; False: the kind's agent
    # brings its own tools and a row may name any
    serves_tools: bool = True
    # (env key, why): keys the kind never reads; set away from their default, the config is refused
    refuses: tuple[tuple[str, str], ...] = ()
    # {dotted key: value} the kind sets where params.yaml leaves the key out, from the raw config tree
    defaults: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # the config whose SFT makes this kind's warm start, from the run's and its rows; None: the run's
    warm_start: Callable[[Any, Rows], Any] | None = None


ENVS: Registry[EnvBuilder, EnvTraits] = Registry(
    "environment", key="env.kind", where="agent_r1.envs.factory.ENVS", plugins="agent_r1.envs", traits=EnvTraits)

# env keys only the openai_agent kind reads: every warm start is keyed with them at their defaults, so the
# warm start of a run does not depend on which agent (or how many at once) its RL part trains
AGENT_ONLY_KEYS = ("agent", "agent_concurrency", "agent_timeout_s")


def kind_traits(kind: Any) -> EnvTraits:
    """The traits of env kind `kind`; the defaults for a name no kind has (validation reports it)."""
    try:
        return ENVS.traits(kind)
    except (KeyError, ValueError, TypeError):
        return EnvTraits()


def apply_kind_defaults(tree: dict[str, Any]) -> None:
    """Sets, in a raw config tree, the defaults its env kind asks for where the tree leaves them out."""
    env = tree.get("env")
    traits = kind_traits(env.get("kind", "tool") if isinstance(env, dict) else "tool")
    for dotted, value in (traits.defaults(tree) if traits.defaults else {}).items():
        section, key = dotted.split(".")
        if isinstance(tree.setdefault(section, {}), dict):
            tree[section].setdefault(key, value)


def check_kind_keys(env: Any) -> None:
    """Refuses env keys the run's kind never reads, set away from their defaults, naming the key."""
    default = type(env)()
    for key, why in kind_traits(env.kind).refuses:
        if getattr(env, key) != getattr(default, key):
            raise ValueError(f"env.{key} is set, but env.kind={env.kind} {why}")


def warm_start_config(cfg: Any, rows: Rows) -> Any:
    """The config whose SFT makes `cfg`'s warm start (and whose settings key it): the kind's own mapping
    (openai_agent: the built-in env's, agent_kind.py), with the agent-only keys at their defaults."""
    hook = kind_traits(cfg.env.kind).warm_start
    view = hook(cfg, rows) if hook else cfg
    default = type(view.env)()
    env = replace(view.env, **{k: getattr(default, k) for k in AGENT_ONLY_KEYS})
    return replace(view, env=env)


def warm_start_changes(cfg: Any, view: Any) -> list[str]:
    """`section.key: run -> warm start` for the env and SFT settings the warm start's config changes."""
    out = []
    for section in ("env", "sft"):
        mine, theirs = getattr(cfg, section), getattr(view, section)
        out += [f"{section}.{f.name}: {getattr(mine, f.name)!r} -> {getattr(theirs, f.name)!r}" for f in fields(mine)
                if f.name not in AGENT_ONLY_KEYS and getattr(mine, f.name) != getattr(theirs, f.name)]
    return out


def make_env_factory(cfg: Any, retriever: Any) -> Callable[[dict[str, Any]], Any]:
    """`make_env(sample)` of the env kind `cfg.env.kind` (`cfg` is the run config; `retriever` may be
    None when no tool searches)."""
    return ENVS[cfg.env.kind](cfg, retriever)


@ENVS.register("tool")
def tool_envs(cfg: Any, retriever: Any) -> Callable[[dict[str, Any]], Any]:
    """`make_env(sample)`: a ToolEnv over the tools in `env.tools`, with the sample's own `env`
    settings (a subset of those tools, budgets, reward settings) applied. `cfg` is the run config
    (its `env`, `reward` and `search` sections are read).

    Tools are built once per run; samples that use the same subset share one ToolRunner, so
    the rollout batches their calls. `env.tool_args[name]` is passed to that tool's factory;
    `search` also gets the retriever and the `search` section. A name that an `env.mcp_servers`
    server offers is that server's tool; `make_env.close()` ends the servers' connections (they
    also end at interpreter exit).
    """
    from agent_r1.envs.formats import get_format
    from agent_r1.envs.tool_env import ToolEnv, sample_env_config
    from agent_r1.tools.registry import create_tool
    from agent_r1.tools.runner import ToolRunner

    if not cfg.env.tools:
        raise ValueError("env.tools is empty; name at least one registered tool, e.g. env.tools: [search]")
    unknown = sorted(set(cfg.env.tool_args) - set(cfg.env.tools))
    if unknown:
        raise ValueError(f"env.tool_args has options for {unknown}, which env.tools {cfg.env.tools} does not use")
    served, connections = _mcp_tools(cfg)
    pool = {}
    for name in cfg.env.tools:
        if name in served:
            pool[name] = served[name]
            continue
        kwargs = dict(cfg.env.tool_args.get(name, {}))
        if name == "search":
            if retriever is None:
                raise ValueError("env.tools includes 'search' but no retriever was given; build the index "
                                 "(`agent-r1 build-index`) or drop search from env.tools")
            kwargs = {"retriever": retriever, "k": cfg.search.k, "max_chars_per_doc": cfg.search.max_chars_per_doc,
                      **kwargs}
        pool[name] = create_tool(name, **kwargs)
    fmt = get_format(cfg.env.format, list(pool.values()))
    runners: dict[tuple[str, ...], ToolRunner] = {}
    serves_tools = kind_traits(cfg.env.kind).serves_tools  # a kind built over these envs may bring its own tools

    def make_env(sample: dict[str, Any]) -> ToolEnv:
        env_cfg, reward_cfg = sample_env_config(sample, cfg.env, cfg.reward, serves_tools)
        names = tuple(env_cfg.tools)
        if names not in runners:
            runners[names] = ToolRunner([pool[n] for n in names], timeout_s=cfg.search.timeout_s)
        return ToolEnv(runners[names], fmt, env_cfg, reward_cfg)

    def close() -> None:  # closing twice is harmless, so each owner of the factory may close it
        for conn in connections:
            conn.close()

    make_env.close = close  # type: ignore[attr-defined]
    return make_env


@ENVS.register("openai_agent", serves_tools=False, defaults=agent_defaults,
               warm_start=agent_warm_start)
def openai_agent_envs(cfg: Any, retriever: Any) -> Any:
    """A user's agent function (`env.agent: package.module:function`), trained through the OpenAI-compatible
    endpoint (agents/rollout.py): the returned `make_env` carries its own `run_rollout`, which the rollout
    loop dispatches to. The function is imported here, at startup; a failed import names the key."""
    from agent_r1.agents.agent_ref import load_agent
    from agent_r1.agents.rollout import AgentRollout

    if not cfg.env.agent:
        raise ValueError("env.kind=openai_agent needs env.agent: 'package.module:function' (the agent to train)")
    agent = load_agent(cfg.env.agent)
    tools, connections = agent_mcp_tools(cfg, agent)
    return AgentRollout(agent, cfg.env.agent_concurrency, cfg.env.agent_timeout_s, tools, connections)


def agent_mcp_tools(cfg: Any, agent: Any) -> tuple[Any, list[Any]]:
    """`env.mcp_servers` under openai_agent: every tool the servers offer, for an agent with a `tools`
    parameter (agents/agent_tools.py), and the connections to close; (None, []) without servers. An agent
    without one is refused here, before any server starts: it would never call them."""
    if not cfg.env.mcp_servers:
        return None, []
    from agent_r1.agents.agent_tools import AgentTools, takes_tools
    from agent_r1.tools.mcp_tools import connect_mcp_tools

    if not takes_tools(agent):
        raise ValueError(f"env.mcp_servers is set, but env.agent={cfg.env.agent!r} has no `tools` parameter, so it "
                         "could never call the servers' tools: add one, "
                         "`agent(client, sample, tools)` (tools.schemas, tools.call(name, arguments); docs/agents.md), "
                         "or remove env.mcp_servers")
    tools, connections = connect_mcp_tools(cfg.env.mcp_servers, cfg.search.timeout_s)
    return AgentTools(tools), connections


def _mcp_tools(cfg: Any) -> tuple[dict[str, Any], list[Any]]:
    """{name: tool} of the MCP servers' tools that env.tools names, and the connections to close.
    A server none of whose tools is used is closed at once; a name that is also a registered tool is
    an error (which one the model would get should not depend on lookup order)."""
    if not cfg.env.mcp_servers:
        return {}, []
    from agent_r1.tools.mcp_tools import connect_mcp_tools
    from agent_r1.tools.registry import TOOL_FACTORIES, available_tools

    tools, connections = connect_mcp_tools(cfg.env.mcp_servers, cfg.search.timeout_s)
    used = {t.name: t for t in tools if t.name in cfg.env.tools}
    try:
        unknown = [n for n in cfg.env.tools if n not in used and n not in available_tools()]
        if unknown:
            raise ValueError(f"env.tools names {unknown}, which no MCP server of env.mcp_servers offers (they "
                             f"offer {sorted(t.name for t in tools)}) and no registered tool is")
        for name, t in used.items():
            if name in TOOL_FACTORIES:
                raise ValueError(f"tool {name!r} is both a registered tool and offered by MCP server "
                                 f"{t.connection.cfg.name!r}; give the server a prefix (env.mcp_servers[].prefix)")
            if name in cfg.env.tool_args:
                raise ValueError(f"env.tool_args.{name}: MCP tool {name!r} takes no options; its server has them")
    except ValueError:
        for conn in connections:
            conn.close()
        raise
    live = {id(t.connection) for t in used.values()}
    for conn in connections:
        if id(conn) not in live:
            conn.close()
    return used, [c for c in connections if id(c) in live]
