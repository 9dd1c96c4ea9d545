"""How trajectories are sampled: the `rollout:` section of the config (turn and token budgets,
temperature, group size, the engine and its vLLM options), and how a seeded rollout derives the seed
of each thing it samples (`mix_seed`).

It sits below both the config tree (config.py) and the rollout loop (rollout/), so the config tree
imports no engine (docs/architecture.md) while the loop reads the same typed section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_r1.registry import NoTraits, Registry

_BUILDERS = "agent_r1.rollout.engines"
#: `rollout.engine` name -> builder(model, tokenizer, EngineOptions) -> a GenerationEngine. It sits here,
#: below the config tree, so validation reads the names without importing an engine; the builders
#: register in rollout/engines.py, imported on the first lookup of a built-in name.
ENGINES: Registry[Callable[[Any, Any, Any], Any], NoTraits] = Registry(
    "generation engine", key="rollout.engine", where="agent_r1.sampling.ENGINES",
    builtins={"auto": _BUILDERS, "transformers": _BUILDERS, "vllm": _BUILDERS})


ENGINE_CORES = ("auto", "inline", "process")  # rollout.vllm.engine_core


@dataclass
class VLLMOptions:
    """`rollout.vllm`: how a vLLM engine is built (ignored by the transformers engine)."""
    gpu_memory_utilization: float = 0.5  # CUDA: the share of GPU memory vLLM takes (the learner shares it)
    kv_cache_gib: float = 1.0  # CPU build: its KV cache in GiB (VLLM_CPU_KVCACHE_SPACE)
    max_model_len: int = 0  # 0 = rollout.max_total_tokens
    enforce_eager: bool = True  # no CUDA graphs / torch.compile: starts in seconds, not minutes
    # where vLLM's engine core (scheduler and model runner) runs: `process` (vLLM's default: a process of
    # its own beside the caller, which overlaps scheduling with a GPU's work), `inline` (in the caller's
    # process), `auto` (inline on the CPU build, process elsewhere). On the CPU build the extra processes
    # each import vLLM and torch and compete with the model for the same cores: inline starts sooner and
    # samples more tokens/s there
    engine_core: str = "auto"

    def __post_init__(self) -> None:
        if self.engine_core not in ENGINE_CORES:  # its numbers are checked with the config (schema.LIMITS)
            raise ValueError(f"rollout.vllm.engine_core={self.engine_core!r}: choose one of {', '.join(ENGINE_CORES)}")


@dataclass
class RolloutConfig:
    max_turns: int = 4
    max_tokens_per_turn: int = 48
    max_observation_tokens: int = 96
    max_total_tokens: int = 768  # prompt + every action and observation
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    n_samples: int = 1  # trajectories per prompt (the GRPO/RLOO group size)
    # keep each trajectory's KV cache between turns, so a turn encodes only its new tokens
    # (engines that support it: TransformersEngine); outputs are unchanged up to float rounding
    kv_reuse: bool = True
    # an action cut by max_tokens_per_turn inside a tool call (or an answer) gets action mask 0 (never
    # trained on, as DAPO's overlong filtering): the glue closing it was never written by the model.
    # A cut outside any call stays trained, so rambling without acting can still be penalised.
    mask_truncated_turns: bool = True
    # the generation engine (agent_r1/rollout/engines.py) of in-process training, evaluation and Ray's
    # rollout workers alike: transformers | vllm | auto (vLLM where it imports and a CUDA GPU is
    # visible, else transformers; on a CPU ask for vllm to use vllm-cpu). One key, as verl's rollout.name
    engine: str = "auto"
    vllm: VLLMOptions = field(default_factory=VLLMOptions)

    def __post_init__(self) -> None:
        for key in ("max_turns", "max_tokens_per_turn", "max_observation_tokens", "max_total_tokens", "n_samples"):
            if getattr(self, key) < 1:
                raise ValueError(f"rollout.{key} must be >= 1, got {getattr(self, key)}")


def check_trainable_sampling(rollout: RolloutConfig) -> None:
    """Training rollouts sample from the full tempered distribution: the trainer's log-probs
    (softmax(logits / T)) can reproduce that one, not a top-p / top-k truncation of it."""
    if rollout.top_p < 1.0 or rollout.top_k > 0:
        raise ValueError(f"rollout.top_p={rollout.top_p} / rollout.top_k={rollout.top_k}: training samples from the "
                         "full distribution at rollout.temperature, since the trainer's log-probs cannot reproduce a "
                         "truncated one; set rollout.top_p: 1.0 and rollout.top_k: 0 (evaluation decodes greedily)")


# the strides of `mix_seed` at its two call sites (agents/): session j of a seeded agent rollout, and call k
# of a seeded endpoint session. Two values, as they always were: changing either changes every seeded rollout
SESSION_SEED_STRIDE = 1_000_003
CALL_SEED_STRIDE = 1_000_033


def mix_seed(seed: int, index: int, stride: int) -> int:
    """The seed of the `index`-th thing drawn under `seed` (a session of a rollout, a call of a session).
    With indices below `stride`, different (seed, index) pairs get different seeds (short of the wrap);
    kept to 63 bits, a seed every engine takes."""
    return (seed * stride + index) % 2**63
