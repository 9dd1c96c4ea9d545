"""Shared parts of the performance benchmarks (perf_rollout.py, perf_update.py, perf_trl.py).

- `alternate(fns, repeats)`: runs A, B, ... alternated (ABAB, then BABA, ...) so that drift on a
  shared machine hits every variant alike; returns each one's timings.
- `summary(values)`: median, min, max of repeats. Ratios are taken per repeat pair, then the median.
- `peak_rss_mb()`: this process's peak resident set size (resource.getrusage).
- `policy(...)`: the benchmark policy: the default CPU model warm-started by a short SFT on the
  scripted-agent demos (so it writes searches and tantivy is really called), or on a GPU a larger,
  randomly initialised Qwen2-shaped model in bf16 (no weights needed).
- `hermes_policy(...)`: the tool-mode policy of perf_trl.py: `policy()`'s warm start plus a short SFT
  on the same demos written in the hermes format (`<tool_call>` JSON) through a given chat template,
  so that it writes calls that parse (cached in the work folder; 500 steps: after 100, a third of its
  calls were malformed and TRL's loop, which ends an episode there, made a third of agent-r1's calls).
- `write_result(name, payload)`: benchmarks/results/<name>.json with machine (common.machine), peak RSS
  and payload.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, machine, micro_overrides, result_path, work_dir, write_json


def perf_work() -> Path:
    """The perf benchmarks' shared work folder (data, index, warm starts)."""
    return work_dir("perf")


# A Qwen2-shaped model for GPU hosts (the layer shapes of Qwen2.5-0.5B, this project's vocabulary).
GPU_MODEL = {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
             "intermediate_size": 4864}


def peak_rss_mb() -> float:
    """Peak RSS of this process in MiB (Linux reports ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def time_generate(engine: Any) -> list[float]:
    """Wraps `engine.generate` so each call adds its seconds to the returned one-element list."""
    spent, generate = [0.0], engine.generate

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return generate(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t0

    engine.generate = timed
    return spent


def summary(values: list[float], digits: int = 4) -> dict[str, Any]:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits), "runs": [round(v, digits) for v in values]}


def alternate(fns: dict[str, Callable[[int], Any]], repeats: int, sync: Callable[[], None] | None = None,
              start: int = 0) -> dict[str, list[tuple[float, Any]]]:
    """Calls every fn(repeat) `repeats` times (repeat = start, start + 1, ...), alternating the
    order each repeat (A B, B A, ...). Returns name -> [(seconds, fn's return value)]."""
    names = list(fns)
    out: dict[str, list[tuple[float, Any]]] = {n: [] for n in names}
    for r in range(start, start + repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            if sync:
                sync()
            t0 = time.perf_counter()
            value = fns[name](r)
            if sync:
                sync()
            out[name].append((time.perf_counter() - t0, value))
    return out


def ratio_summary(num: list[float], den: list[float]) -> dict[str, Any]:
    """Median of per-repeat ratios num[i] / den[i] (A and B of one repeat ran back to back)."""
    return summary([a / b for a, b in zip(num, den)], 3)


def write_result(name: str, payload: dict[str, Any], device: str = "cpu") -> Path:
    doc = {"benchmark": name, "command": " ".join([Path(sys.executable).name, *sys.argv]),
           "machine": machine(device), **payload, "peak_rss_mb": peak_rss_mb()}
    return write_json(result_path(name), doc, indent=2)


def base_overrides(work: Path | None = None) -> dict[str, Any]:
    """The default run (params.yaml) with its data, index and SFT under the benchmark's work folder.
    The tokenizer stays byte-level BPE, as when the committed figures were measured (params.yaml
    later switched to the syllable split, which changes token counts)."""
    work = work or perf_work()
    return {"data.dir": str(work / "data"), "search.index_dir": str(work / "index"), "model.tokenizer": "bpe",
            "sft.out_dir": str(work / "sft"), "train.out_dir": str(work / "train"),
            "train.checkpoint_every": 100000, "train.eval_size": 0, "train.log_trajectories_every": 0}


def load_cfg(extra: dict[str, Any] | None = None, work: Path | None = None):
    from agent_r1.config import load_config

    return load_config(ROOT / "params.yaml", {**base_overrides(work), **(extra or {})})


def policy(cfg: Any, device: str = "cpu", sft_steps: int = 60, dtype: str = "float32") -> tuple[Any, Any, dict]:
    """(model, tokenizer, description). CPU: params.yaml's model after `sft_steps` of SFT on the
    scripted demos (cached in the work folder). GPU: a random Qwen2-shaped model (GPU_MODEL) with the
    same tokenizer; random weights write no valid calls, so every turn gets an error observation."""
    import torch

    from agent_r1.models.build import load_model

    if device.startswith("cuda"):
        return _gpu_policy(cfg, device, dtype)
    warm = Path(cfg.sft.out_dir) / "model"
    stamp = Path(cfg.sft.out_dir) / "perf_sft_steps.txt"
    if not warm.exists() or not stamp.exists() or stamp.read_text() != str(sft_steps):
        from dataclasses import replace

        from agent_r1.runs.warm_start import run_sft

        t0, threads = time.perf_counter(), torch.get_num_threads()
        try:  # run_sft sets train.threads; the benchmark's own thread count is restored after
            run_sft(replace(cfg, sft=replace(cfg.sft, steps=sft_steps, guess_fraction=0.0)))
        finally:
            torch.set_num_threads(threads)
        stamp.write_text(str(sft_steps))
        print(f"warm start: {sft_steps} SFT steps in {time.perf_counter() - t0:.0f} s", flush=True)
    model, tok = load_model(warm)
    desc = {"kind": f"params.yaml model, {sft_steps} SFT steps on scripted demos (guess_fraction 0)",
            "parameters": sum(p.numel() for p in model.parameters()), "dtype": "float32"}
    return model.to(device), tok, desc


def hermes_policy(cfg: Any, chat_template: str, sft_steps: int = 500, batch_size: int = 16,
                  base_steps: int = 60) -> tuple[Any, Any, dict]:
    """(model, tokenizer, description) for a tool loop in the hermes format: `policy(cfg)` (the tag
    warm start, `base_steps` SFT steps), its tokenizer given `chat_template`, then `sft_steps` more
    SFT steps (batch `batch_size`, guess_fraction 0) on the scripted demos rendered with
    `env.format=hermes` through that template (the tools' JSON schema in the system prompt, calls
    as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, observations as tool messages).
    Cached in <work>/sft_hermes; calls agent_r1.training.demos.build_demos and sft.sft_train as is."""
    import hashlib
    from dataclasses import replace

    import torch

    from agent_r1.models.build import load_model, save_model

    out = Path(cfg.sft.out_dir).parent / "sft_hermes"
    warm = out / "model"
    key = f"base={base_steps} steps={sft_steps} batch={batch_size} lr={cfg.sft.lr} seed={cfg.seed} " \
          f"template={hashlib.sha1(chat_template.encode()).hexdigest()[:12]}"
    stamp = out / "perf_sft_key.txt"
    base_model, base_tok, base_desc = policy(cfg, "cpu", base_steps)
    if not warm.exists() or not stamp.exists() or stamp.read_text() != key:
        from agent_r1.rollout.chat import ChatCodec
        from agent_r1.runs.run import Run
        from agent_r1.training.demos import build_demos
        from agent_r1.tracking.metrics import JsonlMetrics
        from agent_r1.training.sft import sft_train

        t0 = time.perf_counter()
        hcfg = replace(cfg, env=replace(cfg.env, format="hermes"))
        base_tok.chat_template = chat_template
        with Run(hcfg) as run:
            demos = build_demos(run.samples("train"), run.env_factory, ChatCodec(base_tok), "hermes", 0.0,
                                hcfg.seed, hcfg.rollout.max_observation_tokens)
        threads = torch.get_num_threads()
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").unlink(missing_ok=True)
        losses = sft_train(base_model, base_tok, demos, sft_steps, batch_size, hcfg.sft.lr, hcfg.seed,
                           JsonlMetrics(out / "metrics.jsonl"), 10)
        torch.set_num_threads(threads)
        save_model(base_model, base_tok, warm)
        stamp.write_text(key)
        print(f"hermes warm start: {sft_steps} SFT steps on {len(demos)} demos in {time.perf_counter() - t0:.0f} s, "
              f"loss {losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)
    model, tok = load_model(warm)
    tok.chat_template = chat_template
    desc = {**base_desc, "kind": f"{base_desc['kind']}, then {sft_steps} SFT steps (batch {batch_size}) on the same "
                                 "demos in the hermes format through the given chat template"}
    return model, tok, desc


def _gpu_policy(cfg: Any, device: str, dtype: str) -> tuple[Any, Any, dict]:
    """A random Qwen2-shaped model (GPU_MODEL) with the run's tokenizer (trained here, no SFT)."""
    import torch
    import transformers

    from agent_r1.runs.run import Run

    _, tok = Run(cfg).policy()
    torch.manual_seed(0)
    hf = transformers.Qwen2Config(vocab_size=len(tok), max_position_embeddings=4096, tie_word_embeddings=True,
                                  pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                  bos_token_id=tok.bos_token_id, **GPU_MODEL)
    model = transformers.Qwen2ForCausalLM(hf).to(getattr(torch, dtype)).to(device)
    return model, tok, {"kind": "random Qwen2-shaped model", **GPU_MODEL,
                        "parameters": sum(p.numel() for p in model.parameters()), "dtype": dtype}


def device_overrides(device: str) -> dict[str, Any]:
    """The trainer's own device and precision settings for a benchmark on `device` (a GPU host
    computes in bf16 over float32 master weights, as `train.precision: bf16` does for users)."""
    return {"train.device": device, "train.precision": "bf16" if device.startswith("cuda") else "fp32"}


def smoke_overrides() -> dict[str, Any]:
    """The micro model and world (common.micro_overrides' sizes) for a `--smoke` run."""
    return {k: v for k, v in micro_overrides(perf_work()).items()
            if k.startswith(("data.n_", "model.", "rollout.", "train.prompts_per_iter", "train.runs_dir"))}


def bench_cfg(args: Any, extra: dict[str, Any] | None = None, work: Path | None = None):
    """load_cfg, with the micro sizes under `--smoke`."""
    return load_cfg({**(smoke_overrides() if args.smoke else {}), **(extra or {})}, work)


def sft_steps(args: Any, default: int = 60) -> int:
    """The warm start's SFT steps: 2 under `--smoke` (the machinery, not a policy that searches)."""
    return 2 if args.smoke else default


def add_common_args(ap: Any) -> None:
    ap.add_argument("--smoke", action="store_true", help="micro model, 1 repeat, smallest sweeps (the smoke tests)")
    ap.add_argument("--full", action="store_true", help="the long version (more repeats, larger sweeps)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (a GPU host: a larger random Qwen2-shaped model)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: leaves the other core alone)")
    ap.add_argument("--repeats", type=int, default=None)
