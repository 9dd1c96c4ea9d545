"""docs/scaling.md's whole-iteration table: agent-r1 with vLLM's CPU build as the engine, the transformers
engine, TRL and TRL's vLLM mode on the equal-work 128 x 256 cell (perf_vllm.json:
`.venv-vllm/bin/python benchmarks/perf_vllm.py --cells 128x256 --repeats 3 --kv-cache-gib 1`), and the
README sentence that quotes it. See tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from tests.readme_figures_lib import Figure, at, num

P = "perf_vllm.json"
C = "cells.128x256"
ROWS = (("agent-r1, transformers engine", "agent_r1"), ("agent-r1, vLLM engine (weight sync included)", "agent_r1_vllm"),
        ("TRL `GRPOTrainer`, transformers `generate()`", "trl"),
        ("TRL `GRPOTrainer`, `use_vllm=True, vllm_mode=\"colocate\"`", "trl_vllm"))
COLUMNS = (("seconds per iteration", "seconds_per_iteration", num(2)),
           ("generation tokens/s", "generation_tokens_per_s", num(0, comma=True)),
           ("update tokens/s", "update_tokens_per_s", num(0, comma=True)))


def cell_context(label: str, column: int) -> str:
    """The table row's text up to the figure in column `column` (0-based)."""
    return f"| {label} | " + "~ | " * column + "@@ |"


TABLE = [Figure(f"perf vllm table, {side}: {name}", P, f"{C}.sides.{side}.{key}.median", fmt,
                cell_context(label, i)) for label, side in ROWS for i, (name, key, fmt) in enumerate(COLUMNS)]
PROSE = [
    Figure("perf vllm: vLLM / transformers engine per iteration", P, f"{C}.ratios.vllm_over_transformers.median",
           num(2), "vLLM / the transformers engine @@ per iteration"),
    Figure("perf vllm: vLLM / transformers engine, generation", P,
           f"{C}.ratios_generate.vllm_over_transformers.median", num(2), "per iteration (@@ for generation"),
    Figure("perf vllm: vLLM / TRL", P, f"{C}.ratios.vllm_over_trl.median", num(2), "agent-r1 with vLLM / TRL @@;"),
    Figure("perf vllm: vLLM / TRL vLLM mode", P, f"{C}.ratios.vllm_over_trl_vllm.median", num(2),
           "/ TRL's own vLLM mode @@."),
    Figure("perf vllm: engine start", P, f"{C}.vllm_start_s", num(1), "vLLM started in @@ s (once per run"),
    Figure("perf vllm: weight sync span", P, f"{C}.vllm_sync_s", lambda v: f"{min(v):.2f}-{max(v):.2f}",
           "each iteration's weight sync took @@ s"),
    Figure("perf vllm: parameters", P, "model.parameters", num(2, scale=1e-6), "fresh copy of the same @@M-parameter"),
]
README_SENTENCE = [
    Figure(f"perf vllm README: {side}", P, f"{C}.sides.{side}.seconds_per_iteration.median", num(1), context)
    for side, context in (("agent_r1_vllm", "with vLLM's CPU build as the engine took @@ s"),
                          ("agent_r1", "against @@ s with the transformers engine"),
                          ("trl", "TRL's `GRPOTrainer` took @@ s"),
                          ("trl_vllm", "and TRL in its own vLLM mode @@ s"))]
VLLM_PERF: list[Figure] = at("docs/scaling.md", TABLE + PROSE) + README_SENTENCE
