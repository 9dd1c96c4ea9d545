"""One typed config tree, read from params.yaml (the single source of truth) plus overrides.

Unknown keys, wrong types and impossible values fail at start with the key named.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent_r1.envs.tool_env import EnvConfig
from agent_r1.models.build import ModelConfig
from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.loop import RolloutConfig
from agent_r1.training.configs import AlgoConfig, SFTConfig, TrainConfig


@dataclass
class DataConfig:
    source: str = "synthetic"  # synthetic | a prepared folder's name
    dir: str = "data/synthetic"  # holds train.jsonl, dev.jsonl, test.jsonl, corpus.jsonl
    train_file: str = "train.jsonl"
    eval_file: str = "test.jsonl"
    n_people: int = 450  # synthetic world size
    question_types: tuple[str, ...] = ("one_hop", "bridge", "comparison")  # synthetic question types


@dataclass
class SearchConfig:
    backend: str = "tantivy"  # tantivy | elasticsearch
    index_dir: str = "data/index"
    url: str = ""  # Elasticsearch URL (auth comes from environment variables)
    index_name: str = "agent-r1-corpus"
    k: int = 3
    max_chars_per_doc: int = 300
    timeout_s: float = 10.0


@dataclass
class RayConfig:
    """Distributed training (agent_r1/training/ray_trainer.py); `enabled: false` trains in-process."""
    enabled: bool = False
    address: str = ""  # empty = start a local Ray in-process; "auto" or host:port = join a running cluster
    num_workers: int = 1  # rollout worker actors; each rolls out a contiguous shard of the prompts
    cpus_per_worker: float = 1.0  # also the worker's torch threads (rounded, at least 1)
    gpus_per_worker: float = 0.0
    learner_cpus: float = 1.0
    engine: str = "auto"  # auto (vLLM when it imports and a GPU is visible) | transformers | vllm
    max_restarts: int = 3  # a dead rollout worker is restarted this many times; its shard is rolled out again
    num_cpus: int = 0  # local Ray only: logical CPUs (0 = enough for the actors, at least the machine's cores)
    temp_dir: str = ""  # local Ray only: empty = <repo>/.ray, or /tmp/agent-r1-ray-<uid> if that path is too long


@dataclass
class ExperimentConfig:
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(n_samples=4))
    reward: RewardConfig = field(default_factory=RewardConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, key)
            except ValueError:
                continue
        raise ValueError(f"config key {key!r}: {value!r} is not a {hint}")
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"config key {key!r}: expected a list, got {value!r}")
        return origin(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f"config key {key!r}: expected true/false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"config key {key!r}: expected a number, got {value!r}")
        if isinstance(value, str):
            try:
                value = float(value) if hint is float else int(value)
            except ValueError:
                raise ValueError(f"config key {key!r}: expected {hint.__name__}, got {value!r}") from None
        if hint is int and (not isinstance(value, int) and not float(value).is_integer()):
            raise ValueError(f"config key {key!r}: expected an integer, got {value!r}")
        return hint(value)
    if hint is str:
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"config key {key!r}: expected a string, got {value!r}")
        return str(value)
    return value


def _default_of(cls: type, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _build(cls: type, data: dict[str, Any], prefix: str, base: Any = None) -> Any:
    """`base` is the field's own default instance, so a partial section keeps its other defaults."""
    if not isinstance(data, dict):
        raise ValueError(f"config section {prefix.rstrip('.') or 'root'!r} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"unknown config key(s) {[prefix + k for k in unknown]}; "
                         f"valid keys under {prefix.rstrip('.') or 'root'!r}: {sorted(names)}")
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        key = prefix + name
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value, key + ".", _default_of(cls, name))
        else:
            kwargs[name] = _coerce(value, hint, key)
    try:
        return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
    except ValueError as err:
        raise ValueError(f"config section {prefix.rstrip('.') or 'root'!r}: {err}") from None


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {dotted!r}: {p!r} is not a section")
    node[parts[-1]] = value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`["train.algo=grpo", "train.lr=1e-3"]` -> {"train.algo": "grpo", ...} (YAML-typed values)."""
    import yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        k, v = item.split("=", 1)
        out[k.strip()] = yaml.safe_load(v) if v.strip() else ""  # `key=` means an empty string
    return out


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Reads params.yaml (if given) and applies dotted overrides, then validates."""
    import yaml

    tree: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"params file {str(p)!r} not found; pass --params PATH")
        tree = yaml.safe_load(p.read_text()) or {}
        if not isinstance(tree, dict):
            raise ValueError(f"params file {str(p)!r} must hold a mapping at the top level")
    for dotted, value in (overrides or {}).items():
        _set_path(tree, dotted, value)
    config = _build(ExperimentConfig, tree, "")
    validate(config)
    return config


def validate(c: ExperimentConfig) -> None:
    """Cross-field checks a dataclass cannot express on its own."""
    from agent_r1.algos import ADV_ESTIMATORS, POLICY_LOSSES
    from agent_r1.envs.formats import FORMATS

    checks = [
        (c.train.lr > 0, "train.lr must be > 0"),
        (c.sft.lr > 0, "sft.lr must be > 0"),
        (c.train.iterations >= 0, "train.iterations must be >= 0"),
        (c.train.prompts_per_iter >= 1, "train.prompts_per_iter must be >= 1"),
        (c.train.ppo_epochs >= 1, "train.ppo_epochs must be >= 1"),
        (c.train.minibatch_size >= 1, "train.minibatch_size must be >= 1"),
        (c.algo.adv_estimator in ADV_ESTIMATORS,
         f"algo.adv_estimator={c.algo.adv_estimator!r}; known: {sorted(ADV_ESTIMATORS)}"),
        (c.algo.policy_loss in POLICY_LOSSES, f"algo.policy_loss={c.algo.policy_loss!r}; known: {sorted(POLICY_LOSSES)}"),
        (c.env.format in FORMATS, f"env.format={c.env.format!r}; known: {sorted(FORMATS)}"),
        (not (c.algo.adv_estimator in {"grpo", "grpo_no_std", "rloo", "reinforce_pp_baseline"}
              and c.rollout.n_samples < 2),
         f"algo.adv_estimator={c.algo.adv_estimator!r} compares samples of one prompt: "
         f"set rollout.n_samples >= 2 (got {c.rollout.n_samples})"),
        (0.0 <= c.sft.guess_fraction <= 1.0, "sft.guess_fraction must be in [0, 1]"),
        (c.search.k >= 1, "search.k must be >= 1"),
        (c.ray.num_workers >= 1, "ray.num_workers must be >= 1"),
        (c.ray.engine in ("auto", "transformers", "vllm"), f"ray.engine={c.ray.engine!r}; known: auto, transformers, vllm"),
        (c.ray.cpus_per_worker >= 0 and c.ray.gpus_per_worker >= 0 and c.ray.learner_cpus >= 0,
         "ray.cpus_per_worker, ray.gpus_per_worker and ray.learner_cpus must be >= 0"),
        (0 < c.algo.gamma <= 1 and 0 <= c.algo.lam <= 1, "algo.gamma must be in (0, 1] and algo.lam in [0, 1]"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    for key in ("train_file", "eval_file"):  # file names inside data.dir: they may not leave it
        name = getattr(c.data, key)
        if not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise ValueError(f"data.{key}={name!r} must be a file name inside data.dir ({c.data.dir!r}), "
                             "not an absolute path or one with '..'; point data.dir at the folder instead")
    if urlsplit(c.search.url).username or urlsplit(c.search.url).password:
        raise ValueError("search.url holds credentials (user:password@); remove them and set "
                         "AGENT_R1_ES_API_KEY or AGENT_R1_ES_USER/AGENT_R1_ES_PASSWORD, so they are never "
                         "logged with the config")
