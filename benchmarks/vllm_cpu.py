"""vLLM's CPU build against the transformers engine, on a `--like qwen2.5` folder (the real 151,936-token
vocabulary, head_dim 64 as vLLM's CPU attention needs): engine start, seconds per weight sync, sampled
tokens/s on the same prompts, and the engine-vs-trainer log-prob gap. Run it in `.venv-vllm`:

    .venv-vllm/bin/python -m benchmarks.vllm_cpu [--prompts 32] [--tokens 64] [--hidden 128]

Writes benchmarks/results/vllm_cpu.json ($OUT/vllm_cpu.json when $OUT is set), with the engine core where
`rollout.vllm.engine_core: auto` puts it (inline on the CPU build).
Both engines sample every prompt to its full budget (no stop ids; a random model almost never samples
its end token), at temperature 1, from one batch: the same work, so tokens/s compare engines, not
rollouts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine, result_path, write_json


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--syncs", type=int, default=5)
    args = ap.parse_args(argv)
    args.prompt_tokens, args.layers = 256, 2
    return args


def build_policy(args: argparse.Namespace) -> tuple[Any, Any]:
    """A `--like qwen2.5` folder of the asked shape, built in a temp folder and loaded in float32."""
    from agent_r1.cli import main as cli
    from agent_r1.models.build import load_model

    folder = Path(tempfile.mkdtemp(prefix="vllm-cpu-bench-")) / "model"
    assert cli(["build-model", "--like", "qwen2.5", "--out", str(folder), "--hidden-size", str(args.hidden),
                "--num-heads", str(args.hidden // 64), "--num-kv-heads", "1", "--num-layers", str(args.layers)]) == 0
    model, tokenizer = load_model(folder, "float32")
    model.eval()
    return model, tokenizer


def logprob_gaps(engine: Any, model: Any, prompts: list[list[int]], tokens: int) -> list[float]:
    """|engine - trainer| log-prob of each token vLLM sampled at temperature 0.7 (8 prompts)."""
    import torch

    from agent_r1.rollout.engine import SamplingParams
    from agent_r1.training.compute import token_logprobs

    outs = engine.generate(prompts[:8], SamplingParams(max_new_tokens=tokens, temperature=0.7, seed=2))
    gaps = []
    for p, o in zip(prompts[:8], outs):
        ids = torch.tensor([p + o.token_ids])
        with torch.no_grad():
            lp, _ = token_logprobs(model, ids, torch.ones_like(ids), 0.7)
        gaps += [abs(a - b) for a, b in zip(o.logprobs, lp[0, len(p):].tolist())]
    return gaps


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from agent_r1.rollout.engine import SamplingParams, TransformersEngine
    from agent_r1.rollout.vllm_engine import VLLMEngine
    from agent_r1.sampling import VLLMOptions

    model, tokenizer = build_policy(args)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 5000, (args.prompt_tokens,), generator=g).tolist() for _ in range(args.prompts)]
    params = SamplingParams(max_new_tokens=args.tokens, temperature=1.0, seed=1)

    t0 = time.perf_counter()
    engine = VLLMEngine.from_model(model, tokenizer, dtype="float32", max_model_len=args.prompt_tokens + args.tokens,
                                   options=VLLMOptions())
    start_s = time.perf_counter() - t0

    def timed(eng) -> tuple[float, int, list]:
        t = time.perf_counter()
        outs = eng.generate(prompts, params)
        return time.perf_counter() - t, sum(len(o.token_ids) for o in outs), outs

    engine.generate(prompts[:2], SamplingParams(max_new_tokens=4))  # warm-up
    v_runs = [timed(engine) for _ in range(3)]
    hf = TransformersEngine(model, tokenizer)
    h_runs = [timed(hf) for _ in range(3)]
    syncs = [engine.sync_weights(model) for _ in range(args.syncs)]
    gaps = logprob_gaps(engine, model, prompts, args.tokens)
    engine.close()

    def rate(runs) -> float:
        return round(statistics.median(n / s for s, n, _ in runs), 1)

    n_params = sum(p.numel() for p in model.parameters())
    doc = {
        "benchmark": "vllm_cpu", "command": " ".join(["python", *sys.argv]),
        "model": {"like": "qwen2.5", "hidden_size": args.hidden, "num_layers": args.layers, "parameters": n_params},
        "work": {"prompts": args.prompts, "prompt_tokens": args.prompt_tokens, "new_tokens": args.tokens},
        "versions": _versions(), "machine": machine(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "engine_core": engine.engine_core, "vllm_start_s": round(start_s, 1),
        "vllm_tokens_per_s": rate(v_runs), "transformers_tokens_per_s": rate(h_runs),
        "weight_sync_s_median": round(statistics.median(syncs), 3), "weight_sync_s": [round(s, 3) for s in syncs],
        "logprob_gap_max_t07": max(gaps), "logprob_gap_tokens": len(gaps),
    }
    write_json(Path(os.environ["OUT"]) / "vllm_cpu.json" if os.environ.get("OUT") else result_path("vllm_cpu"), doc,
               indent=2)
    print(json.dumps(doc, indent=2))
    return 0


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("vllm-cpu", "torch", "transformers")}


if __name__ == "__main__":  # the engine core is a spawned process: it re-imports this module
    raise SystemExit(main())
