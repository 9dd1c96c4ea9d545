"""The env factory of a run: one ToolEnv per sample over the tools the config names.

Lives with the envs (it knows only tools, formats and a retriever handed in), so the trainer, the
evaluation harness and the run assembly (agent_r1/runs/) all build envs the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def make_env_factory(cfg: Any, retriever: Any) -> Callable[[dict[str, Any]], Any]:
    """`make_env(sample)`: a ToolEnv over the tools in `env.tools`, with the sample's own `env`
    settings (a subset of those tools, budgets, reward settings) applied. `cfg` is the run config
    (its `env`, `reward` and `search` sections are read).

    Tools are built once per run; samples that use the same subset share one ToolRunner, so
    the rollout batches their calls. `env.tool_args[name]` is passed to that tool's factory;
    `search` also gets the retriever and the `search` section.
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
    pool = {}
    for name in cfg.env.tools:
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

    def make_env(sample: dict[str, Any]) -> ToolEnv:
        env_cfg, reward_cfg = sample_env_config(sample, cfg.env, cfg.reward)
        names = tuple(env_cfg.tools)
        if names not in runners:
            runners[names] = ToolRunner([pool[n] for n in names], timeout_s=cfg.search.timeout_s)
        return ToolEnv(runners[names], fmt, env_cfg, reward_cfg)

    return make_env
