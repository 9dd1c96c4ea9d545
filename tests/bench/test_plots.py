"""benchmarks/plots.py on the committed result files: every figure is a real, non-empty PNG, and a
missing result file is skipped (not an error)."""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks import plots

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _plots():
    return plots


def test_plots_write_png_files_from_the_real_results(tmp_path):
    assert _plots().main(["--results", str(RESULTS), "--out", str(tmp_path)]) == 0
    names = {"bench-learning.png", "bench-learning-endpoint.png", "bench-memory.png", "bench-scaling.png", "bench-retrieval.png",
             "bench-retrieval-scale.png"}
    assert {p.name for p in tmp_path.iterdir()} == names
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == PNG_SIGNATURE, name
        assert len(data) > 10_000, (name, len(data))


def test_a_missing_result_file_is_skipped(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(RESULTS / "memory.json", results / "memory.json")
    out = tmp_path / "img"
    assert _plots().main(["--results", str(results), "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["bench-memory.png"]
    printed = capsys.readouterr().out
    assert "learning: skipped" in printed and "learning_endpoint: skipped" in printed and "scaling: skipped" in printed and "retrieval: skipped" in printed
