"""Generation engines: token ids in, sampled token ids and their log-probabilities out.

`TransformersEngine` batches every active trajectory of a turn into one left-padded batch,
decodes with a KV cache, and drops rows from the batch as soon as they finish.
"""

from __future__ import annotations

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
    seed: int | None = None


@dataclass
class GenerationOutput:
    token_ids: list[int]
    logprobs: list[float]  # log-probability of each sampled token under the sampling distribution
    finish_reason: str  # "stop" (stop token or string) or "length"
    stop: str | None = None  # which stop string / token ended it
    extra: dict[str, Any] = field(default_factory=dict)


class GenerationEngine(Protocol):
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]: ...


class TransformersEngine:
    """Sampling loop over a `transformers` causal LM (CPU or GPU)."""

    def __init__(self, model: Any, tokenizer: Any, device: str = "cpu"):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.pad_id = tokenizer.pad_token_id
        self._special_text = {i: tokenizer.convert_ids_to_tokens(i) for i in tokenizer.all_special_ids}

    def _token_text(self, tid: int) -> str:
        return self._special_text.get(tid) or self.tokenizer.decode([tid])

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        import torch

        from agent_r1.rollout.sampling import sample_next

        n = len(prompts)
        if n == 0:
            return []
        budgets = params.max_new_tokens if isinstance(params.max_new_tokens, list) else [params.max_new_tokens] * n
        outs = [GenerationOutput([], [], "length") for _ in range(n)]
        tails = [""] * n  # decoded recent text per row, for stop strings
        max_stop = max((len(s) for s in params.stop_strings), default=0)
        gen = torch.Generator().manual_seed(params.seed) if params.seed is not None else None
        stop_ids = set(params.stop_token_ids)

        width = max(len(p) for p in prompts)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attn[i, width - len(p):] = 1
        rows = [i for i in range(n) if budgets[i] > 0]  # live rows, in batch order
        if len(rows) < n:
            keep = torch.tensor(rows, dtype=torch.long)
            ids, attn = ids[keep], attn[keep]
        cache = None
        step_input = ids
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                while rows:
                    pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, -step_input.shape[1]:]
                    out = self.model(input_ids=step_input.to(self.device), attention_mask=attn.to(self.device),
                                     position_ids=pos.to(self.device), cache=cache, use_cache=True,
                                     logits_to_keep=1)
                    cache = out.cache
                    tokens, logps = sample_next(out.logits[:, -1, :].float().cpu(), params, gen)
                    finished = []
                    for b, row in enumerate(rows):
                        tid, o = int(tokens[b]), outs[row]
                        o.token_ids.append(tid)
                        o.logprobs.append(float(logps[b]))
                        if tid in stop_ids:
                            o.finish_reason, o.stop = "stop", self._token_text(tid)
                        elif max_stop:
                            # the kept tail is shorter than any stop string, so a match must
                            # involve this token: a stop inside a token's text is caught too
                            window = tails[row] + self._token_text(tid)
                            hit = next((s for s in params.stop_strings if s in window), None)
                            tails[row] = window[-(max_stop - 1):] if max_stop > 1 else ""
                            if hit is not None:
                                o.finish_reason, o.stop = "stop", hit
                        if o.finish_reason == "stop" or len(o.token_ids) >= budgets[row]:
                            finished.append(b)
                    attn = torch.cat([attn, torch.ones((attn.shape[0], 1), dtype=torch.long)], dim=1)
                    step_input = tokens.view(-1, 1)
                    if finished:  # drop finished rows from the batch and the KV cache
                        keep_b = [b for b in range(len(rows)) if b not in set(finished)]
                        rows = [rows[b] for b in keep_b]
                        if not rows:
                            break
                        keep = torch.tensor(keep_b, dtype=torch.long)
                        attn, step_input = attn[keep], step_input[keep]
                        cache.batch_select_indices(keep.to(self.device))
        finally:
            self.model.train(was_training)
        return outs
