"""`agent-r1 sft`: a supervised warm start assembled from the config (data, index, demos, model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.tracking.metrics import JsonlMetrics


def sft_config(cfg: ExperimentConfig, data_dir: Path) -> ExperimentConfig:
    """The config whose SFT makes `cfg`'s warm start: the env kind's own mapping (openai_agent: the
    built-in env's chat settings over the rows' tools, envs/agent_kind.py), agent-only keys at their
    defaults. An openai_agent run's demos are still its agent's (`played_demos`), so its warm start's key
    adds the agent (`agent_code`)."""
    from agent_r1.envs.factory import warm_start_config
    from agent_r1.runs.assembly import load_samples

    return warm_start_config(cfg, lambda: load_samples(data_dir / cfg.data.train_file))


def played_demos(cfg: ExperimentConfig, samples: list, codec: Any) -> list:
    """An openai_agent run's demos: its agent (env.agent) played against the scripted policy through the
    endpoint (training/agent_demos.py), so the warm start learns the prompts, tool schemas, tool results and
    turns the agent itself sends, not the built-in env's."""
    from agent_r1.agents.agent_ref import load_agent
    from agent_r1.envs.factory import agent_mcp_tools
    from agent_r1.training.agent_demos import agent_demos

    # SFT draws steps x batch_size demos at most: a short run plays no more sessions than it can use
    samples = samples[:max(1, cfg.sft.steps * cfg.sft.batch_size)]
    agent = load_agent(cfg.env.agent)
    tools, connections = agent_mcp_tools(cfg, agent)  # env.mcp_servers: the agent calls them in its demos too
    demos, stats = agent_demos(agent, samples, codec, cfg.rollout, cfg.reward, cfg.sft.guess_fraction, cfg.seed,
                               cfg.env.agent_concurrency, cfg.env.agent_timeout_s, tools, connections)
    print(f"SFT demos from env.agent={cfg.env.agent}: {stats.line()}", flush=True)
    return demos


def agent_code(cfg: ExperimentConfig) -> dict[str, str]:
    """What an openai_agent run's demos depend on beyond the built-in env's settings (a warm start's key):
    env.agent and the digest of the module that defines it ({} for other kinds)."""
    if cfg.env.kind != "openai_agent":
        return {}
    import hashlib
    import inspect

    from agent_r1.agents.agent_ref import load_agent

    fn = load_agent(cfg.env.agent)
    source = inspect.getsourcefile(inspect.unwrap(fn)) or ""
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest() if source and Path(source).is_file() else ""
    return {"agent": cfg.env.agent, "agent_source": digest}


def run_sft(cfg: ExperimentConfig) -> Path:
    """`agent-r1 sft`: data -> index -> fresh model -> demos -> SFT -> `cfg.sft.out_dir/model`. Under
    openai_agent the demos are the agent's own sessions over a scripted policy (`played_demos`)."""
    from agent_r1.closing import close_all
    from agent_r1.models.build import save_model
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.envs.factory import make_env_factory
    from agent_r1.runs.assembly import (build_policy, ensure_data, ensure_index, load_samples, open_run_index,
                                        set_threads)
    from agent_r1.training.demos import build_demos
    from agent_r1.training.sft import print_progress, sft_train

    from agent_r1.envs.factory import warm_start_changes

    set_threads(cfg.train.threads)
    data_dir = ensure_data(cfg)
    run_cfg, cfg = cfg, sft_config(cfg, data_dir)  # openai_agent: the built-in env's demos (envs/agent_kind.py)
    changed = warm_start_changes(run_cfg, cfg)
    if changed:
        print(f"env.kind={run_cfg.env.kind}: SFT in the built-in env with " + "; ".join(changed), flush=True)
    retriever = open_run_index(cfg, ensure_index(cfg, data_dir))
    model, tokenizer = build_policy(cfg, data_dir)
    samples = load_samples(data_dir / cfg.data.train_file, cfg=cfg)
    if run_cfg.env.kind == "openai_agent":
        demos = played_demos(run_cfg, samples, ChatCodec(tokenizer))
    else:
        make_env = make_env_factory(cfg, retriever)
        try:
            demos = build_demos(samples, make_env, ChatCodec(tokenizer), cfg.env.format,
                                cfg.sft.guess_fraction, cfg.seed, cfg.rollout.max_observation_tokens,
                                cfg.sft.demo_style)
        finally:
            close_all(make_env)  # the demos' tool calls are done: end MCP servers before training
    out = Path(cfg.sft.out_dir)
    losses = sft_train(model, tokenizer, demos, cfg.sft.steps, cfg.sft.batch_size, cfg.sft.lr, cfg.seed,
                       JsonlMetrics(out / "metrics.jsonl"), cfg.sft.log_every,
                       on_step=print_progress(cfg.sft.steps))
    save_model(model, tokenizer, out / "model")
    retriever.close()
    print(f"SFT: {len(demos)} demos, {cfg.sft.steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
          f"model saved to {out / 'model'}")
    return out / "model"
