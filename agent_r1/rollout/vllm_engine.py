"""A vLLM generation engine behind the `GenerationEngine` protocol, and engine selection.

vLLM is an optional GPU extra (`pip install 'agent-r1[gpu]'`, in its own environment: its wheels
pin another torch). It is imported lazily, only when a vLLM engine is asked for, so everything
else imports and runs without it. It is exercised only on a GPU host; on CPU machines
`select_engine` falls back to `TransformersEngine`.

Token-in/token-out: prompts go in as token ids (`TokensPrompt`), the sampled ids come back as
they are, with the log-probability of each sampled token (`logprobs=0`: the sampled token only).
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent_r1.rollout.engine import GenerationEngine, GenerationOutput, SamplingParams, TransformersEngine

GPU_EXTRA_HINT = ("install vLLM in a GPU environment (`pip install 'agent-r1[gpu]'`), or set "
                  "ray.engine=transformers")


def vllm_available() -> bool:
    """True when the `vllm` package is installed (checked without importing it: the import is heavy)."""
    return importlib.util.find_spec("vllm") is not None


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def select_engine(model: Any, tokenizer: Any, prefer: str = "auto", **vllm_options: Any) -> GenerationEngine:
    """The generation engine for `model`:

    - "auto": vLLM when it is installed and a CUDA GPU is visible, else transformers;
    - "transformers": `TransformersEngine` (on the GPU when there is one);
    - "vllm": `VLLMEngine`, or a clear error saying what is missing.
    """
    if prefer not in ("auto", "transformers", "vllm"):
        raise ValueError(f"engine {prefer!r} is unknown; choose auto, transformers or vllm")
    if prefer == "vllm" or (prefer == "auto" and vllm_available() and cuda_available()):
        if not vllm_available():
            raise ImportError(f"engine 'vllm' was requested but the vllm package is not installed; {GPU_EXTRA_HINT}")
        if not cuda_available():
            raise RuntimeError("engine 'vllm' was requested but no CUDA GPU is visible "
                               f"(torch.cuda.is_available() is False); {GPU_EXTRA_HINT}")
        return VLLMEngine.from_model(model, tokenizer, **vllm_options)
    device = "cuda" if cuda_available() else "cpu"
    if device == "cuda":
        model.to(device)
    return TransformersEngine(model, tokenizer, device=device)


class VLLMEngine:
    """`vllm.LLM.generate` from token ids; sampled ids and their log-probs back.

    `model_path` is a local folder or hub id with the same weights the learner trains; new
    weights arrive with `load_weights` (from the learner through the Ray object store).
    """

    def __init__(self, model_path: str | Path, tokenizer: Any, dtype: str = "auto",
                 gpu_memory_utilization: float = 0.5, max_model_len: int | None = None, seed: int = 0,
                 **llm_options: Any):
        from vllm import LLM  # lazy: the optional GPU extra

        self.tokenizer = tokenizer
        options = dict(model=str(model_path), tokenizer=str(model_path), dtype=dtype, seed=seed,
                       gpu_memory_utilization=gpu_memory_utilization, enable_prefix_caching=True, **llm_options)
        if max_model_len:
            options["max_model_len"] = max_model_len
        try:
            # log-probs under the distribution sampled from (after temperature / top-k / top-p),
            # as TransformersEngine reports them; older vLLM reports the raw model's log-probs
            self.llm = LLM(logprobs_mode="processed_logprobs", **options)
            self.processed_logprobs = True
        except TypeError:
            self.llm = LLM(**options)
            self.processed_logprobs = False

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, **options: Any) -> "VLLMEngine":
        """From an in-memory transformers model: saved once to a local folder vLLM can load."""
        folder = Path(tempfile.mkdtemp(prefix="agent-r1-vllm-"))
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return cls(folder, tokenizer, **options)

    def sampling_params(self, params: SamplingParams, n: int) -> list[Any]:
        """One vLLM SamplingParams per prompt (budgets and seeds are per prompt)."""
        from vllm import SamplingParams as VSamplingParams

        budgets = params.max_new_tokens if isinstance(params.max_new_tokens, list) else [params.max_new_tokens] * n
        out = []
        for i, budget in enumerate(budgets):
            out.append(VSamplingParams(
                n=1, max_tokens=max(int(budget), 1), temperature=max(params.temperature, 0.0),
                top_k=params.top_k if params.top_k > 0 else -1, top_p=params.top_p,
                stop_token_ids=list(params.stop_token_ids), stop=list(params.stop_strings) or None,
                include_stop_str_in_output=True,  # the policy's own tokens are kept as sampled
                skip_special_tokens=False, logprobs=0, detokenize=bool(params.stop_strings),
                seed=None if params.seed is None else params.seed + i,
            ))
        return out

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        from vllm.inputs import TokensPrompt

        if not prompts:
            return []
        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        results = self.llm.generate(requests, sampling_params=self.sampling_params(params, len(prompts)),
                                    use_tqdm=False)
        return [_to_output(r.outputs[0], self.tokenizer) for r in results]

    def load_weights(self, weights: dict[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Loads the learner's weights (a state dict, HF parameter names) into the running engine."""
        items = list(weights.items()) if isinstance(weights, dict) else list(weights)
        if hasattr(self.llm, "collective_rpc"):  # vLLM V1: the model lives in the engine's worker(s)
            self.llm.collective_rpc(_load_into_worker, args=(items,))
        else:  # vLLM V0: the driver worker holds the model
            runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
            runner.model.load_weights(items)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()  # cached KV came from the old weights


def _load_into_worker(worker: Any, items: list[tuple[str, Any]]) -> None:
    worker.model_runner.model.load_weights(weights=items)


def _to_output(completion: Any, tokenizer: Any) -> GenerationOutput:
    ids = list(completion.token_ids)
    logprobs = []
    for tid, entry in zip(ids, completion.logprobs or []):
        lp = entry.get(tid) if entry else None
        logprobs.append(float(lp.logprob) if lp is not None else float("nan"))
    reason = "length" if completion.finish_reason == "length" else "stop"
    stop = completion.stop_reason  # a stop string, a stop token id, or None (end of sequence)
    if isinstance(stop, int):
        stop = tokenizer.convert_ids_to_tokens(stop)
    return GenerationOutput(token_ids=ids, logprobs=logprobs, finish_reason=reason, stop=stop)
