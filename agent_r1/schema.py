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


UNIT = R("[0, 1]")
# Every number has a ceiling that fits one machine: `search.k: 1e12` once made tantivy ask
# for 16 TB and abort the process. Counts of things held in memory get ceilings a real run never nears;
# coefficients get ceilings past any sensible setting, so a typo (1e12) fails at load naming the key.
MANY = 10**9  # iterations, steps, intervals: far past any run
TOKENS = R("[1, 1048576]")  # token budgets: 1M tokens, past any model's context
COEF = R("[0, 1000000]")

#: The allowed range of every number in the config tree, by section and key (the test
#: tests/config/test_config_ranges.py fails when a numeric key has none, or no upper bound). Optional keys are
#: checked only when set. Per-sample `env` values (envs/tool_env.py) are checked against the same table.
LIMITS: dict[str, dict[str, Range]] = {
    "": {"seed": R("[0, 4294967295]")},  # numpy's seed range
    "model": {"hidden_size": R("[1, 65536]"), "num_layers": R("[1, 1024]"), "num_heads": R("[1, 1024]"),
              "intermediate_size": R("[1, 262144]"), "max_position_embeddings": TOKENS,
              "vocab_size": R("[1, 1048576]")},
    "model.lora": {"r": R("[0, 4096]"), "alpha": R("(0, 1000000]"), "dropout": R("[0, 1)")},
    "data": {"n_people": R("[1, 10000000]")},
    # k hits per query are held in memory for every query of a batch: 1,000 is past any use. Batch sizes
    # are held in memory (documents, queries, passages at once); faiss's HNSW needs at least 2 neighbours
    "search": {"k": R("[1, 1000]"), "max_chars_per_doc": R("[1, 1000000]"), "timeout_s": R("(0, 86400]"),
               "es_pool_size": R("[1, 1024]"), "retry_attempts": R("[1, 100]"), "retry_backoff_s": R("[0, 3600]"),
               "bulk_chunk_size": R("[1, 100000]"), "msearch_batch_size": R("[1, 10000]"), "hnsw_m": R("[2, 1024]"),
               "hnsw_ef_construction": R("[1, 100000]"), "hnsw_ef_search": R("[1, 100000]"),
               "encode_batch_size": R("[1, 65536]")},
    "env": {"max_calls_per_turn": R("[1, 256]"), "agent_concurrency": R("[1, 4096]"),
            "agent_timeout_s": R("(0, 86400]")},
    # each entry of the list env.mcp_servers (tools/mcp_tools.py McpServerConfig); timeout_s 0 = search.timeout_s
    "env.mcp_servers": {"timeout_s": R("[0, 86400]"), "connect_timeout_s": R("(0, 86400]")},
    "rollout": {"max_turns": R("[1, 10000]"), "max_tokens_per_turn": TOKENS, "max_observation_tokens": TOKENS,
                "max_total_tokens": TOKENS, "n_samples": R("[1, 4096]"), "temperature": R("[0, 100]"),
                "top_k": R("[0, 1048576]"), "top_p": R("(0, 1]")},
    "rollout.vllm": {"gpu_memory_utilization": R("(0, 1]"), "kv_cache_gib": R("(0, 65536]"),
                     "max_model_len": R("[0, 1048576]")},  # 0: the model's own
    "reward": {"format_penalty": R("[-10, 0]"), "valid_call_reward": R("[-10, 10]"),
               "retrieval_hit_reward": R("[-10, 10]"), "max_process_reward": R("[0, 100]"),
               "overlong_buffer": R("[0, 1048576]"), "overlong_penalty": R("[0, 100]")},
    "algo": {"offpolicy_clip": R("(0, 1000000]"), "clip_low": R("[0, 1)"), "clip_high": R("[0, 1000]"),
             "dual_clip": R("(1, 1000000]"), "gamma": R("(0, 1]"), "lam": UNIT, "kl_coef": COEF,
             "entropy_coef": COEF, "vf_clip": R("(0, 1000000]"), "critic_lr": R("(0, 10]"),
             "loss_norm_tokens": R("[0, 1048576]")},  # 0 = rollout.max_total_tokens
    "algo.dynamic_sampling": {"max_extra_rounds": R("[0, 100]")},
    "algo.rollout_correction": {"token_cap": R("(0, 1000000]"), "seq_low": R("(0, 1)"), "seq_high": R("(1, 1000000]")},
    "algo.gigpo": {"step_weight": R("[0, 1000]")},
    "train": {"max_staleness": R("[0, 1000]"), "iterations": R(f"[0, {MANY}]"), "prompts_per_iter": R("[1, 1000000]"),
              "ppo_epochs": R("[1, 1000]"), "minibatch_size": R("[1, 10000000]"), "lr": R("(0, 10]"),
              "weight_decay": R("[0, 100]"), "max_grad_norm": R("(0, 1000000]"), "checkpoint_every": R(f"[1, {MANY}]"),
              "keep_checkpoints": R("[0, 1000000]"),  # 0 keeps every checkpoint
              "eval_every": R(f"[0, {MANY}]"), "eval_size": R("[0, 10000000]"), "threads": R("[0, 4096]"),
              "log_trajectories_every": R(f"[0, {MANY}]"), "max_bad_updates": R("[1, 1000000]"),
              "micro_batch_size": R("[0, 10000000]"), "warmup_iterations": R(f"[0, {MANY}]"),
              "logit_chunk": R("[1, 10000000]")},
    "sft": {"steps": R(f"[0, {MANY}]"), "batch_size": R("[1, 1000000]"), "lr": R("(0, 10]"), "guess_fraction": UNIT,
            "log_every": R(f"[1, {MANY}]")},
    "ray": {"num_workers": R("[1, 100000]"), "cpus_per_worker": R("[0, 4096]"), "gpus_per_worker": R("[0, 1024]"),
            "learner_cpus": R("[0, 4096]"), "max_restarts": R("[0, 1000000]"), "num_cpus": R("[0, 1000000]"),
            "num_learners": R("[1, 100000]")},
}


def limited(section: str, key: str, kind: type = int) -> typing.Callable[[str], Any]:
    """An argparse `type=` for a command-line number that sets (or stands for) config key
    `section.key`: parsed as `kind` and held to its LIMITS range, so `--hidden-size 1e12` is a usage
    error naming the range, never an allocation that aborts the process."""
    import argparse

    rng = LIMITS[section][key]

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {text!r}") from None
        if not rng.contains(value):
            raise argparse.ArgumentTypeError(f"{value} is not in {rng} (the range of {section}.{key})".replace(" .", " "))
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def count(text: str) -> int:
    """An argparse `type=` for a command-line count with no config key (questions per file, rows per
    batch): a whole number of at least 1. 0 would do nothing and a negative one drops items through
    Python's slicing, both silently."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a count: give 1 or more")
    return value


#: The longest text of any string key (paths, names, URLs), and the keys allowed more: a setting is never
#: megabytes (a 20,000,000-character system prompt in a data row was accepted, then tokenised every turn).
MAX_TEXT_CHARS = 4096
TEXT_LIMITS: dict[str, dict[str, int]] = {"env": {"system_prompt": 16_384}}


def check_limits(obj: Any, section: str = "", label: str | None = None) -> None:
    """Every number of `obj`, the config section `section` (and of the sections inside it), within
    its `LIMITS` range, and every string within its TEXT_LIMITS length; errors name `label` (default:
    the section) and the key."""
    limits = LIMITS.get(section, {})
    prefix = f"{section if label is None else label}." if (section or label) else ""
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), prefix + f.name
        if isinstance(value, str):
            most = TEXT_LIMITS.get(section, {}).get(f.name, MAX_TEXT_CHARS)
            if len(value) > most:
                raise ValueError(f"{key} is {len(value):,} characters, over its ceiling of {most:,} "
                                 f"(schema.TEXT_LIMITS): {value[:40]!r}...")
        if dataclasses.is_dataclass(value):
            check_limits(value, f"{section}.{f.name}".lstrip("."), None if label is None else key)
        elif isinstance(value, (list, tuple)):  # a list of sections (env.mcp_servers) has LIMITS of its own
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    check_limits(item, f"{section}.{f.name}".lstrip("."), f"{key}[{i}]")
                else:
                    _check_finite(item, f"{key}[{i}]")
        elif isinstance(value, dict):  # free-form mappings (env.tool_args) reach code as arguments
            _check_finite(value, key)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rng = limits.get(f.name)
            if not (rng.contains(value) if rng else math.isfinite(value)):
                where = f"in {rng}" if rng and rng.hi != math.inf else str(rng or "finite")
                raise ValueError(f"{key} must be {where} (got {value!r})")


def _check_finite(value: Any, key: str) -> None:
    """No NaN or infinity anywhere inside a list or mapping value (they have no LIMITS of their own)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key} must be finite (got {value!r})")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{key}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(v, f"{key}[{i}]")


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
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):  # a list of sections (env.mcp_servers)
        return value if isinstance(value, hint) else build_section(hint, value, f"{key}.")
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


# --------------------------------------------------------------------------- a frozen config tree
class FrozenConfigError(AttributeError):
    """A key of a run's config was set after `Run.open` froze it."""


def freeze(section: Any) -> Any:
    """Makes a config tree read-only in place (every nested section too) and returns it. Setting a key
    then raises FrozenConfigError naming it: a run's config is settled once (`agent_r1/runs/run.py`),
    so no part built later can see another value than the one written to its config.json.

    Each section's class is swapped for a read-only subclass of it, so isinstance, `dataclasses.fields`
    and `==` keep working; `dataclasses.replace`, `copy.deepcopy` and pickling give a writable copy of
    the plain class (a copy is someone else's config; a Ray actor gets the plain class)."""
    if not dataclasses.is_dataclass(section) or isinstance(section, type):
        return section
    for f in dataclasses.fields(section):
        freeze(getattr(section, f.name))
    if not getattr(type(section), "_read_only", False):
        object.__setattr__(section, "__class__", _read_only(type(section)))
    object.__setattr__(section, "_frozen", True)
    return section


def is_frozen(section: Any) -> bool:
    return bool(getattr(section, "_frozen", False))


def _thaw(cls: type, state: dict[str, Any]) -> Any:
    obj = cls.__new__(cls)
    obj.__dict__.update({k: v for k, v in state.items() if k != "_frozen"})
    return obj


_READ_ONLY: dict[type, type] = {}


def _read_only(cls: type) -> type:
    if cls in _READ_ONLY:
        return _READ_ONLY[cls]
    names = [f.name for f in dataclasses.fields(cls)]

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen"):  # an instance being built (replace) is not frozen yet
            raise FrozenConfigError(f"the run's config is frozen: cannot set {cls.__name__}.{name}; pass it as "
                                    "an override before the run opens (Run.open), or copy the config first")
        object.__setattr__(self, name, value)

    def __eq__(self: Any, other: Any) -> Any:
        if not isinstance(other, cls):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        return _thaw, (cls, dict(self.__dict__))

    body = {"__setattr__": __setattr__, "__delattr__": __setattr__, "__eq__": __eq__, "__hash__": None,
            "__reduce_ex__": __reduce_ex__, "_read_only": True, "__module__": cls.__module__,
            "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    _READ_ONLY[cls] = type(cls.__name__, (cls,), body)
    return _READ_ONLY[cls]
