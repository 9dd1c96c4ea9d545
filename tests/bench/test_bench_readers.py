"""Benchmarks' readers and argument parsers, without running a benchmark: the tables rendered from the
committed result files, and the scripts that need `.venv-vllm` parsing their arguments. Quick, so
they stay in `make test`; the benchmarks' micro runs are test_benchmarks_smoke.py (`make bench`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"


def test_paper_table_render_only_rewrites_table_and_plot(tmp_path):
    from benchmarks import paper_table

    shutil.copy(RESULTS / "paper_table_np12k" / "paper_table.json", tmp_path / "paper_table.json")
    assert paper_table.main(["--render-only", "--results-dir", str(tmp_path)]) == 0
    assert "| GRPO" in (tmp_path / "paper_table.md").read_text() and (tmp_path / "paper_table.png").stat().st_size


def test_paper_table_rows_beyond_the_paper_get_their_section_and_a_difference_against_grpo():
    """A row beyond the paper gets its own section and a paired difference against GRPO once every seed has run
    it (a row of fewer seeds is marked, with no difference yet). Here GSPO's rows are GRPO's with one of seed 0's
    right answers flipped to wrong: the difference is exactly -1/3 point (one question in 3 x 100)."""
    from benchmarks.paper_table import render_markdown

    doc = json.loads((RESULTS / "paper_table_np12k" / "paper_table.json").read_text())
    for seed in doc["per_seed"]:
        grpo = doc["per_seed"][seed]["methods"]["grpo"]
        per_q = {ds: list(em) for ds, em in grpo["em_per_question"].items()}
        if seed == "0":
            per_q["synthetic_test"][per_q["synthetic_test"].index(1.0)] = 0.0
        doc["per_seed"][seed]["methods"]["gspo"] = {**grpo, "label": "GSPO (sequence-level ratio)", "em_per_question": per_q}
    md = render_markdown(doc)
    section = md.split("## Beyond the paper")[1].split("##")[0]
    assert "| GRPO |" in section and "| GSPO (sequence-level ratio) |" in section
    line = next(x for x in md.splitlines() if x.startswith("| GSPO (sequence-level ratio) - GRPO |"))
    assert line.split("|")[2].strip().startswith("-0.3 [")
    assert "GSPO" not in md.split("## Table 3")[1].split("##")[0]  # not among the paper's algorithms
    del doc["per_seed"]["2"]["methods"]["gspo"]  # a row two seeds of three have run: marked, no difference
    md = render_markdown(doc)
    assert "(2 of 3 seeds)" in md.split("## Beyond the paper")[1].split("##")[0]
    assert not any(x.startswith("| GSPO (sequence-level ratio) - GRPO") for x in md.splitlines())


def test_vllm_cpu_parses_its_arguments():
    """vllm_cpu.py needs vLLM's CPU build (.venv-vllm): here only its arguments and imports."""
    from benchmarks import vllm_cpu

    args = vllm_cpu.parse_args(["--prompts", "2", "--tokens", "4"])
    assert (args.prompts, args.tokens, args.hidden) == (2, 4, 128)
    out = subprocess.run([sys.executable, "-m", "benchmarks.vllm_cpu", "--help"], cwd=REPO, capture_output=True,
                         text=True)
    assert out.returncode == 0 and "--syncs" in out.stdout


def test_perf_vllm_parses_its_arguments():
    """perf_vllm.py needs vLLM's CPU build and TRL (.venv-vllm plus trl): here only its arguments and imports."""
    from benchmarks import perf_vllm

    args = perf_vllm.parse_args(["--cells", "8x16", "--no-trl-vllm"])
    assert (args.cells, args.repeats, args.no_trl_vllm, args.micro) == ("8x16", 3, True, 8)
    assert set(perf_vllm.PAIRS.values()) <= {(a, b) for a in perf_vllm.SIDES for b in perf_vllm.SIDES}
    out = subprocess.run([sys.executable, "-m", "benchmarks.perf_vllm", "--help"], cwd=REPO, capture_output=True,
                         text=True)
    assert out.returncode == 0 and "--kv-cache-gib" in out.stdout
