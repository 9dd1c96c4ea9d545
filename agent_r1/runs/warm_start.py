"""Warm starts (SFT outputs) as artifacts keyed by what made them.

The key is the hash of (data hash, index hash, seed, model config, SFT config, env config, the
observation budget): everything that changes the demonstrations or the training on them, taken from
the config the SFT runs with (`sft_config` below: an openai_agent run's is the built-in env's
chat settings), so keys that change neither (env.agent_concurrency, ...) do not split warm starts. An
openai_agent run's demos are its agent's own sessions (`played_demos` below), so its key adds env.agent
and the digest of the agent's module (`agent_code`): another agent, or an edited one, is another warm start.

The warm start lives in `<train.runs_dir>/warm_starts/<hash>/` (or `sft.out_dir` when set: DVC keeps a fixed
path) with `warm_start.json` naming its hash; every run whose key matches reuses it instead of
training again. Training happens in a temporary folder renamed into place, under a lock per key, so
two runs that need the same warm start at once train it once and never see half of one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.data.io import replace_dir
from agent_r1.data.owned import check_replaceable
from agent_r1.filelock import FileLock
from agent_r1.runs.assembly import ensure_data, ensure_index, load_samples
from agent_r1.runs.folders import WARM_STARTS
from agent_r1.runs.lineage import DigestCache, data_hash, digest_cache, hash_json, index_hash, short
from agent_r1.tracking.metrics import JsonlMetrics

CARD = "warm_start.json"
LEGACY = (CARD,)  # a warm start made before the marker (agent_r1/data/owned.py) has its card
FORMAT = 1  # bump when the demonstrations or the SFT loop change what a key produces
# keys added after warm starts were keyed: at these values they are left out of the key, so the warm
# starts made before them keep theirs
LATER_KEYS = {("model", "chat_template"): "chatml", ("sft", "demo_style"): "env"}
# chat demos spell a copied value as the context last wrote it (training/demos.py copy_spelling); before,
# every value was spaced: a chat warm start's key names the spelling, so one made before is not reused
CHAT_SPELLING = "copy"


@dataclass
class WarmStart:
    dir: Path
    hash: str
    reused: bool
    ingredients: dict[str, Any]

    @property
    def model_dir(self) -> Path:
        return self.dir / "model"


def card_text(key: str, made_of: dict[str, Any], seconds: float) -> str:
    """warm_start.json: the key and what made it, the env's secrets hidden (the key was hashed from
    the real values, so a changed secret is still another warm start)."""
    from agent_r1.redaction import redact_secrets

    return json.dumps({"hash": key, "ingredients": redact_secrets(made_of), "created": time.time(),
                       "seconds": round(seconds, 1)}, indent=1)


def ingredients(cfg: ExperimentConfig, data_dir: Path, index_dir: Path, cache: DigestCache | None = None) -> dict[str, Any]:
    played = agent_code(cfg)  # openai_agent: the demos are its agent's sessions (`played_demos`)
    cfg = sft_config(cfg, data_dir)
    tree = cfg.to_dict()
    for (section, key), default in LATER_KEYS.items():
        if tree[section].get(key) == default:
            del tree[section][key]
    model = {k: v for k, v in tree["model"].items() if k not in ("lora", "gradient_checkpointing")}  # RL-only
    spelling = {"chat_spelling": CHAT_SPELLING} if cfg.sft.demo_style == "chat" else {}
    return {"format": FORMAT, **spelling, "seed": cfg.seed,
            "data": data_hash(data_dir, (cfg.data.train_file,), cache),
            "index": index_hash(index_dir, cfg.search), "model": model,
            "sft": {k: v for k, v in tree["sft"].items() if k not in ("out_dir", "log_every")},
            "env": tree["env"], "max_observation_tokens": cfg.rollout.max_observation_tokens, **played}


def is_warm_start(folder: Path, key: str | None = None) -> bool:
    card = folder / CARD
    if not (card.is_file() and (folder / "model").is_dir()):
        return False
    return key is None or json.loads(card.read_text()).get("hash") == key


def _link_copy(src: Path, dst: Path) -> None:
    """A copy made of hard links where the filesystem allows (a multi-GB model costs no space)."""
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link)


def ensure_warm_start(cfg: ExperimentConfig, log: Any = print) -> WarmStart:
    """The warm start for `cfg`: reused when one with the same key exists, else trained once."""

    if cfg.sft.steps <= 0:
        raise ValueError("a warm start needs sft.steps > 0; or set train.init_from to a model folder "
                         "(or empty for a fresh model)")
    if cfg.sft.out_dir:  # a folder of the user's own is refused now, not after minutes of SFT
        check_replaceable(cfg.sft.out_dir, "sft.out_dir", legacy=LEGACY)
    data_dir = ensure_data(cfg)
    index_dir = ensure_index(cfg, data_dir)
    cache = digest_cache(cfg)
    from agent_r1.envs.factory import warm_start_changes

    sft_cfg = sft_config(cfg, data_dir)
    changed = warm_start_changes(cfg, sft_cfg)
    if changed:
        log(f"env.kind={cfg.env.kind}: its warm start is the built-in env's with " + "; ".join(changed))
    made_of = ingredients(cfg, data_dir, index_dir, cache)
    cache.save()
    key = hash_json(made_of)
    store = Path(cfg.train.runs_dir) / WARM_STARTS
    stored = store / short(key)
    dest = Path(cfg.sft.out_dir) if cfg.sft.out_dir else stored
    store.mkdir(parents=True, exist_ok=True)
    with FileLock(store / f".{short(key)}.lock"):
        if is_warm_start(dest, key):
            log(f"warm start {short(key)} reused from {dest} (same data, index, model, SFT and env settings)")
            return WarmStart(dest, key, True, made_of)
        if dest != stored and is_warm_start(stored, key):
            tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            _link_copy(stored, tmp)
            replace_dir(tmp, dest, *_setting(dest, stored))
            log(f"warm start {short(key)} reused: {stored} -> {dest}")
            return WarmStart(dest, key, True, made_of)
        tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)  # a killed earlier attempt of this very process id
        tmp.mkdir(parents=True)
        log(f"warm start {short(key)}: training ({cfg.sft.steps} SFT steps) into {dest}")
        started = time.perf_counter()
        sub = _with_out_dir(cfg, tmp)  # run_sft maps it to its SFT config, and plays an agent run's agent
        run_sft(sub)
        (tmp / CARD).write_text(card_text(key, made_of, time.perf_counter() - started))
        replace_dir(tmp, dest, *_setting(dest, stored))
        if dest != stored and not is_warm_start(stored, key):  # the store keeps every warm start made
            tmp = stored.with_name(f"{stored.name}.tmp-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            _link_copy(dest, tmp)
            replace_dir(tmp, stored, "train.runs_dir", "", LEGACY)
    return WarmStart(dest, key, False, made_of)


def _setting(dest: Path, stored: Path) -> tuple[str, str, tuple[str, ...]]:
    """replace_dir's (setting, fix, legacy) for `dest`: the pinned sft.out_dir, or the shared store."""
    return ("sft.out_dir" if dest != stored else "train.runs_dir"), "", LEGACY


def _with_out_dir(cfg: ExperimentConfig, out: Path) -> ExperimentConfig:
    import copy

    sub = copy.deepcopy(cfg)
    sub.sft.out_dir = str(out)
    return sub


def warm_start_of(model_dir: str | Path) -> str | None:
    """The hash of the warm start a model folder is (`.../<hash>/model`), or None."""
    folder = Path(model_dir).parent
    card = folder / CARD
    if Path(model_dir).name == "model" and card.is_file():
        return json.loads(card.read_text()).get("hash")
    return None


# ---------------------------------------------------------------- the SFT run that makes a warm start
# `agent-r1 sft` and `train.init_from: sft`: a supervised warm start assembled from the config (data,
# index, demos, model).

def sft_config(cfg: ExperimentConfig, data_dir: Path) -> ExperimentConfig:
    """The config whose SFT makes `cfg`'s warm start: the env kind's own mapping (openai_agent: the
    built-in env's chat settings over the rows' tools, envs/agent_kind.py), agent-only keys at their
    defaults. An openai_agent run's demos are still its agent's (`played_demos`), so its warm start's key
    adds the agent (`agent_code`)."""
    from agent_r1.envs.factory import warm_start_config

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
    from agent_r1.runs.assembly import build_policy, open_run_index, set_threads
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
