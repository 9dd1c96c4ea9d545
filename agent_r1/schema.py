"""The typed config tree's machinery: building a dataclass section from a mapping (coercion, unknown
keys), the allowed range of every number (`LIMITS`), dotted overrides and alias-free YAML.

It imports nothing from the project, so any package (e.g. envs/tool_env.py, which checks a
sample's own `env` settings with the run's schema) may use it without importing the config tree.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml


@dataclass(frozen=True)
class Range:
    """Allowed values of a number, printed as a user writes them: `>= 0`, `> 0`, `[0, 1)`."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False

    def contains(self, v: float) -> bool:
        if not math.isfinite(v):  # NaN and inf poison rewards and losses; no key wants them
            return False
        return (v > self.lo if self.lo_open else v >= self.lo) and (v < self.hi if self.hi_open else v <= self.hi)

    def __str__(self) -> str:
        if self.hi == math.inf:
            return f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        return f"{'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def R(spec: str) -> Range:
    """`R(">= 0")`, `R("> 0")`, `R("[0, 1)")`, `R("(0, 1]")`."""
    if m := re.fullmatch(r"(>=|>)\s*(\S+)", spec):
        return Range(float(m[2]), lo_open=m[1] == ">")
    m = re.fullmatch(r"([\[(])\s*([^,\s]+)\s*,\s*([^\s\])]+)\s*([\])])", spec)
    if not m:
        raise ValueError(f"bad range spec {spec!r}")
    return Range(float(m[2]), float(m[3]), m[1] == "(", m[4] == ")")


GE0, GT0, GE1, UNIT = R(">= 0"), R("> 0"), R(">= 1"), R("[0, 1]")

#: The allowed range of every number in the config tree, by section and key (the test
#: tests/test_config_ranges.py fails when a numeric key has none). Optional keys are checked only
#: when set. Per-sample `env` values (envs/tool_env.py) are checked against the same table.
LIMITS: dict[str, dict[str, Range]] = {
    "": {"seed": R("[0, 4294967295]")},  # numpy's seed range
    "model": dict.fromkeys(("hidden_size", "num_layers", "num_heads", "intermediate_size", "max_position_embeddings",
                            "vocab_size"), GE1),
    "model.lora": {"r": GE0, "alpha": GT0, "dropout": R("[0, 1)")},
    "data": {"n_people": GE1},
    "search": {"k": GE1, "max_chars_per_doc": GE1, "timeout_s": GT0, "es_pool_size": GE1},
    "env": {"max_calls_per_turn": GE1},
    "rollout": {**dict.fromkeys(("max_turns", "max_tokens_per_turn", "max_observation_tokens", "max_total_tokens",
                                 "n_samples"), GE1), "temperature": GE0, "top_k": GE0, "top_p": R("(0, 1]")},
    "rollout.vllm": {"gpu_memory_utilization": R("(0, 1]"), "kv_cache_gib": GT0, "max_model_len": GE0},
    "reward": {"format_penalty": R("[-10, 0]"), "valid_call_reward": R("[-10, 10]"),
               "retrieval_hit_reward": R("[-10, 10]"), "max_process_reward": R("[0, 100]")},
    "algo": {"offpolicy_clip": GT0, "clip_low": R("[0, 1)"), "clip_high": GE0, "dual_clip": R("> 1"), "gamma": R("(0, 1]"), "lam": UNIT,
             "kl_coef": GE0, "entropy_coef": GE0, "vf_clip": GT0, "critic_lr": GT0},
    "algo.rollout_correction": {"token_cap": GT0, "seq_low": R("(0, 1)"), "seq_high": R("> 1")},
    "train": {"max_staleness": GE0, "iterations": GE0, "prompts_per_iter": GE1, "ppo_epochs": GE1, "minibatch_size": GE1, "lr": GT0,
              "weight_decay": GE0, "max_grad_norm": GT0, "checkpoint_every": GE1,
              "keep_checkpoints": GE0,  # 0 keeps every checkpoint
              "eval_every": GE0, "eval_size": GE0, "threads": GE0, "log_trajectories_every": GE0,
              "max_bad_updates": GE1, "micro_batch_size": GE0, "warmup_iterations": GE0,
              "logit_chunk": GE1},
    "sft": {"steps": GE0, "batch_size": GE1, "lr": GT0, "guess_fraction": UNIT, "log_every": GE1},
    "ray": {"num_workers": GE1, "cpus_per_worker": GE0, "gpus_per_worker": GE0, "learner_cpus": GE0,
            "max_restarts": GE0, "num_cpus": GE0, "num_learners": GE1},
}


def check_limits(obj: Any, section: str = "", label: str | None = None) -> None:
    """Every number of `obj`, the config section `section` (and of the sections inside it), within
    its `LIMITS` range; errors name `label` (default: the section) and the key."""
    limits = LIMITS.get(section, {})
    prefix = f"{section if label is None else label}." if (section or label) else ""
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            check_limits(value, f"{section}.{f.name}".lstrip("."), None if label is None else key)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rng = limits.get(f.name)
            if not (rng.contains(value) if rng else math.isfinite(value)):
                where = f"in {rng}" if rng and rng.hi != math.inf else str(rng or "finite")
                raise ValueError(f"{key} must be {where} (got {value!r})")


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
            raise ValueError(f"config key {key!r}: expected a list, got {_short(value)}")
        item = next((a for a in typing.get_args(hint) if a is not Ellipsis), Any)
        return origin(_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"config key {key!r}: expected a mapping, got {_short(value)}")
        key_hint, value_hint = typing.get_args(hint) or (Any, Any)
        return {_coerce(k, key_hint, f"{key} (a key)"): _coerce(v, value_hint, f"{key}[{k!r}]") for k, v in value.items()}
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(f"config key {key!r}: expected true/false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"config key {key!r}: expected a number, got {_short(value)}")
        if isinstance(value, str):
            try:
                value = float(value) if hint is float else int(value)
            except ValueError:
                raise ValueError(f"config key {key!r}: expected {hint.__name__}, got {value!r}") from None
        if hint is int and (not isinstance(value, int) and not float(value).is_integer()):
            raise ValueError(f"config key {key!r}: expected an integer, got {value!r}")
        return hint(value)
    if hint is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(f"config key {key!r}: expected a string, got {_short(value)}")
        return str(value)
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _default_of(cls: type, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def build_section(cls: type, data: dict[str, Any], prefix: str, base: Any = None) -> Any:
    """`cls` from a mapping, each value coerced to its type hint (errors name `prefix` + key); `base`
    is the field's own default instance, so a partial section keeps its other defaults."""
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
            kwargs[name] = build_section(hint, value, key + ".", _default_of(cls, name))
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


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: 7 nested aliases under env.tool_args once expanded to a 335 MB config
    (a "billion laughs" bomb). A params file has no need for them, so any alias is refused."""

    source = "<yaml>"

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ValueError(f"{self.source}:{event.start_mark.line + 1}: YAML alias *{event.anchor} is not allowed "
                             "(aliases can expand a small file into gigabytes); write the value out instead")
        return super().compose_node(parent, index)


def safe_yaml(text: str, source: str) -> Any:
    """`yaml.safe_load` that refuses aliases; errors name `source` and the line."""
    loader = _NoAliasLoader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`["train.algo=grpo", "train.lr=1e-3"]` -> {"train.algo": "grpo", ...} (YAML-typed values)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        k, v = item.split("=", 1)
        out[k.strip()] = safe_yaml(v, f"override {item[:60]!r}") if v.strip() else ""  # `key=`: an empty string
    return out
