"""Generation engines: token ids in, sampled token ids and their log-probabilities out.

`TransformersEngine` batches every active trajectory of a turn into one left-padded batch,
decodes with a KV cache, and drops rows from the batch as soon as they finish.

Prefix reuse across calls (multi-turn rollouts): a row given a `prefix_keys` entry keeps its KV
cache under that key when it finishes; the next call with the same key and a prompt that extends
the cached ids encodes only the new tokens. Cached keys/values were computed at the same absolute
positions (RoPE is applied before caching), and padding is masked, so reuse changes no output
beyond float rounding.

The KV cache of a call grows into one buffer per layer sized for the call's longest row
(`BufferLayer`), so a decode step writes its new keys/values in place instead of copying the whole
cache (a `DynamicLayer` concatenates: O(length) per token, the largest cost of decoding long
completions of small models on a CPU).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class SamplingParams:
    max_new_tokens: int | list[int] = 64  # an int, or one budget per prompt
    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()
    # an int seeds the call; a list seeds each prompt on its own (the same prompt, seed and weights give
    # the same tokens whichever batch it shares: the endpoint's calls batch by arrival); None: unseeded
    seed: int | list[int] | None = None


@dataclass
class GenerationOutput:
    token_ids: list[int]
    logprobs: list[float]  # log-probability of each sampled token under the sampling distribution
    finish_reason: str  # "stop" (stop token or string) or "length"
    stop: str | None = None  # which stop string / token ended it
    extra: dict[str, Any] = field(default_factory=dict)


class GenerationEngine(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]: ...


# the first transformers release whose causal LMs take `cache=` and return `out.cache`
CACHE_RENAMED_IN = (5, 24)


@functools.cache
def cache_keyword() -> str:
    """The model's KV-cache argument/output name: `cache` from transformers 5.24, `past_key_values`
    before. Asked when generating, not at import, so importing the engine stays free of transformers.

    Why it matters: before 5.24 a model swallows an unknown `cache=` into its **kwargs and returns no
    `cache` attribute, so the old name is not an optional nicety: without it nothing is cached."""
    import transformers
    from packaging.version import Version  # a dependency of transformers itself

    return "cache" if Version(transformers.__version__).release[:2] >= CACHE_RENAMED_IN else "past_key_values"


@dataclass
class CachedPrefix:
    """One row's KV cache: `ids` (length L) and per layer (keys, values), each `[heads, L, head_dim]`."""

    ids: list[int]
    kv: list[tuple[Any, Any]]


class TransformersEngine:
    """Sampling loop over a `transformers` causal LM (CPU or GPU).

    `drop_finished=False` keeps finished rows in the batch until every row is done (what
    `model.generate` does); it exists to measure what dropping them saves.

    `ignore_stops=True` (benchmarks only, never set by training) makes every row sample exactly its
    `max_new_tokens`: stop ids and stop strings are still sampled from the same distribution but no
    longer end a row, so two systems can be timed on the same number of tokens (transformers'
    `min_new_tokens = max_new_tokens` instead masks the stop ids out of the distribution).
    """

    supports_prefix_reuse = True

    def __init__(self, model: Any, tokenizer: Any, device: str = "cpu", drop_finished: bool = True,
                 ignore_stops: bool = False):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.drop_finished = drop_finished
        self.ignore_stops = ignore_stops
        self.pad_id = tokenizer.pad_token_id
        self._special_text = {i: tokenizer.convert_ids_to_tokens(i) for i in tokenizer.all_special_ids}
        self._prefixes: dict[Hashable, CachedPrefix] = {}
        self.stats = {"prompt_tokens": 0, "encoded_prompt_tokens": 0}  # what prefix reuse saved

    def _token_text(self, tid: int) -> str:
        text = self._special_text.get(tid)
        if text is None:  # decoding one id costs microseconds; the stop-string check asks per sampled token
            text = self._special_text[tid] = self.tokenizer.decode([tid]) or ""
        return text

    def drop_prefixes(self, keys: Sequence[Hashable] | None = None) -> None:
        """Frees cached prefixes (all of them when `keys` is None)."""
        if keys is None:
            self._prefixes.clear()
        for k in keys or ():
            self._prefixes.pop(k, None)

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 prefix_keys: Sequence[Hashable | None] | None = None,
                 keep_prefixes: bool = True) -> list[GenerationOutput]:
        """Samples a continuation of each prompt. With `prefix_keys`, row i reuses (and consumes)
        the prefix cached under `prefix_keys[i]` when that prefix starts its prompt and, with
        `keep_prefixes`, caches its own state (prompt + sampled ids but the last) under that key
        when it finishes."""
        import torch

        from agent_r1.rollout.sampling import row_generators, sample_next

        n = len(prompts)
        if n == 0:
            return []
        keys = list(prefix_keys) if prefix_keys is not None else [None] * n
        if len(keys) != n:
            raise ValueError(f"prefix_keys has {len(keys)} entries for {n} prompts")
        budgets = params.max_new_tokens if isinstance(params.max_new_tokens, list) else [params.max_new_tokens] * n
        outs = [GenerationOutput([], [], "length") for _ in range(n)]
        tails = [""] * n  # decoded recent text per row, for stop strings
        stop_strings = () if self.ignore_stops else params.stop_strings
        max_stop = max((len(s) for s in stop_strings), default=0)
        gen = row_generators(params.seed, n)
        stop_ids = set() if self.ignore_stops else set(params.stop_token_ids)

        rows = [i for i in range(n) if budgets[i] > 0]  # live rows, in batch order
        cached = {i: self._take_prefix(keys[i], prompts[i]) for i in rows}
        width = max((len(prompts[i]) for i in rows), default=0)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        for b, i in enumerate(rows):
            p = prompts[i]
            ids[b, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attn[b, width - len(p):] = 1
        # the batch encodes its last `q` columns; the columns before come from cached prefixes
        # (each row's past is a prefix of its cached ids, since len(prompt) - q <= cached length)
        q = max((len(prompts[i]) - (len(cached[i].ids) if cached[i] else 0) for i in rows), default=0)
        q = max(q, 1)
        cache = self._batch_cache(rows, cached, prompts, width - q, q) if width > q else None
        step_input = ids[:, width - q:]
        self.stats["prompt_tokens"] += sum(len(prompts[i]) for i in rows)
        self.stats["encoded_prompt_tokens"] += int(attn[:, width - q:].sum())
        done = [False] * len(rows)  # only used when finished rows stay in the batch
        buffered = False
        cache_kw = cache_keyword()
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                while rows:
                    pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, -step_input.shape[1]:]
                    out = self.model(input_ids=step_input.to(self.device), attention_mask=attn.to(self.device),
                                     position_ids=pos.to(self.device), use_cache=True, logits_to_keep=1,
                                     **{cache_kw: cache})
                    cache = getattr(out, cache_kw)
                    if not buffered:  # after the prompt: one buffer per layer for the rest of the call
                        buffered = use_buffers(cache, width + max(budgets[i] for i in rows))
                    tokens, logps = sample_next(out.logits[:, -1, :].float().cpu(), params,
                                                gen if not isinstance(gen, list) else [gen[r] for r in rows])
                    token_list, logp_list = tokens.tolist(), logps.tolist()
                    finished = []
                    for b, row in enumerate(rows):
                        if done[b]:
                            continue
                        tid, o = token_list[b], outs[row]
                        o.token_ids.append(tid)
                        o.logprobs.append(logp_list[b])
                        if tid in stop_ids:
                            o.finish_reason, o.stop = "stop", self._token_text(tid)
                        elif max_stop:
                            # the kept tail is shorter than any stop string, so a match must
                            # involve this token: a stop inside a token's text is caught too
                            window = tails[row] + self._token_text(tid)
                            hit = next((s for s in stop_strings if s in window), None)
                            tails[row] = window[-(max_stop - 1):] if max_stop > 1 else ""
                            if hit is not None:
                                o.finish_reason, o.stop = "stop", hit
                        if o.finish_reason == "stop" or len(o.token_ids) >= budgets[row]:
                            finished.append(b)
                            if keep_prefixes and keys[row] is not None:
                                self._keep_prefix(keys[row], prompts[row] + o.token_ids[:-1], cache, b, attn)
                    attn = torch.cat([attn, torch.ones((attn.shape[0], 1), dtype=torch.long)], dim=1)
                    step_input = tokens.view(-1, 1)
                    if finished and not self.drop_finished:
                        for b in finished:
                            done[b] = True
                        if all(done):
                            break
                    elif finished:  # drop finished rows from the batch and the KV cache
                        keep_b = [b for b in range(len(rows)) if b not in set(finished)]
                        rows = [rows[b] for b in keep_b]
                        done = [False] * len(rows)
                        if not rows:
                            break
                        keep = torch.tensor(keep_b, dtype=torch.long)
                        attn, step_input = attn[keep], step_input[keep]
                        cache.batch_select_indices(keep.to(self.device))
        finally:
            self.model.train(was_training)
        return outs

    # --- prefix cache -------------------------------------------------------------------
    def _take_prefix(self, key: Hashable | None, prompt: list[int]) -> CachedPrefix | None:
        """The prefix cached under `key` if it is a proper prefix of `prompt` (consumed either way)."""
        if key is None:
            return None
        entry = self._prefixes.pop(key, None)
        if entry is None or len(entry.ids) >= len(prompt) or prompt[: len(entry.ids)] != entry.ids:
            return None
        return entry

    def _keep_prefix(self, key: Hashable, ids: list[int], cache: Any, b: int, attn: Any) -> None:
        """Copies batch row `b` of `cache` (its unpadded tail, `len(ids)` positions) under `key`."""
        length = len(ids)
        # a sliding-window layer holds only the window; the cache must hold exactly these ids
        if any(getattr(layer, "is_sliding", False) for layer in cache.layers) or int(attn[b].sum()) != length:
            self._prefixes.pop(key, None)
            return
        kv = [(layer.keys[b, :, -length:, :].clone(), layer.values[b, :, -length:, :].clone())
              for layer in cache.layers]
        self._prefixes[key] = CachedPrefix(list(ids), kv)

    def _batch_cache(self, rows: list[int], cached: dict[int, CachedPrefix | None], prompts: list[list[int]],
                     past: int, q: int) -> Any:
        """A left-padded DynamicCache `[rows, heads, past, head_dim]` per layer: row b holds the
        first `len(prompt) - q` cached positions of its prefix, right-aligned (zeros elsewhere, masked)."""
        import torch
        from transformers import DynamicCache

        first = next(c for c in cached.values() if c is not None)
        layers = []
        for li, (k0, _) in enumerate(first.kv):
            heads, _, dim = k0.shape
            k = torch.zeros((len(rows), heads, past, dim), dtype=k0.dtype, device=k0.device)
            v = torch.zeros_like(k)
            for b, i in enumerate(rows):
                p = len(prompts[i]) - q  # this row's positions taken from the cache
                if p > 0:
                    entry = cached[i]
                    k[b, :, past - p:] = entry.kv[li][0][:, :p]
                    v[b, :, past - p:] = entry.kv[li][1][:, :p]
            layers.append((k, v))
        return DynamicCache(ddp_cache_data=layers, config=self.model.config)


def use_buffers(cache: Any, capacity: int) -> bool:
    """Swaps every plain `DynamicLayer` of `cache` for a `BufferLayer` of `capacity` positions
    (holding the same keys/values). Other layer kinds (sliding windows, quantised) stay as they are."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if layers is None:
        return True
    for i, layer in enumerate(layers):
        if type(layer) is DynamicLayer and layer.is_initialized and layer.keys.dim() == 4:
            layers[i] = buffer_layer_class().holding(layer.keys, layer.values, capacity)
    return True


@functools.cache
def buffer_layer_class() -> type:
    """`BufferLayer`, built on first use: it subclasses a transformers class, and importing this
    module stays free of transformers (as `cache_keyword` does)."""
    from transformers.cache_utils import DynamicLayer

    class BufferLayer(DynamicLayer):
        """A DynamicLayer whose keys/values live in a preallocated `[batch, heads, capacity, dim]`
        buffer: `update` writes the new positions in place and returns views of the filled part
        (grown by doubling if a call outruns its capacity). Same values as concatenation."""

        @classmethod
        def holding(cls, keys: Any, values: Any, capacity: int) -> Any:
            layer = cls()
            b, h, n, d = keys.shape
            layer._k = keys.new_empty((b, h, max(capacity, n), d))
            layer._v = values.new_empty((b, h, max(capacity, n), values.shape[-1]))
            layer._k[:, :, :n], layer._v[:, :, :n] = keys, values
            layer._n, layer.device, layer.is_initialized = n, keys.device, True
            layer._views()
            return layer

        def _views(self) -> None:
            self.keys, self.values = self._k[:, :, :self._n], self._v[:, :, :self._n]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            n, m = self._n, key_states.shape[-2]
            if n + m > self._k.shape[-2]:
                self._k, self._v = (self._grow(t, 2 * (n + m)) for t in (self._k, self._v))
            self._k[:, :, n:n + m], self._v[:, :, n:n + m] = key_states, value_states
            self._n = n + m
            self._views()
            return self.keys, self.values

        def _grow(self, t: Any, capacity: int) -> Any:
            out = t.new_empty((t.shape[0], t.shape[1], capacity, t.shape[3]))
            out[:, :, :self._n] = t[:, :, :self._n]
            return out

        def get_seq_length(self) -> int:
            return self._n

        def batch_select_indices(self, indices: Any) -> None:
            # kept rows move to the front of the same buffer (filled positions only): no new buffer
            idx, m = indices.to(self._k.device), len(indices)
            for t in (self._k, self._v):
                t[:m, :, :self._n] = t[:, :, :self._n].index_select(0, idx)
            self._k, self._v = self._k[:m], self._v[:m]
            self._views()

    return BufferLayer

