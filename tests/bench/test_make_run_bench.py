"""The benchmark behind README's `make run` figures: the seed sweep's summary and interval and its
per-seed overrides (a seed's own folders, nothing else changed)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from benchmarks import make_run_seeds as seeds

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_summary_mean_min_and_student_t_interval():
    per_seed = {str(i): {"start_em": s, "final_em": f, "lift": f - s, "wall_s": w}
                for i, (s, f, w) in enumerate([(13, 84, 500), (16, 77, 520), (10, 70, 480)])}
    out = seeds.summarise(per_seed)
    lifts = [71, 61, 60]
    assert (out["seeds"], out["lift_min"], out["lift_max"]) == (3, 60, 71)
    assert out["lift_mean"] == pytest.approx(64.0) and out["final_em_min"] == 70 and out["wall_s_max"] == 520
    half = 4.303 * statistics.stdev(lifts) / 3 ** 0.5  # t(0.975, 2 degrees of freedom)
    assert out["lift_ci95"]["low"] == pytest.approx(64.0 - half)
    assert out["lift_ci95"]["high"] == pytest.approx(64.0 + half)
    assert "lift_ci95" not in seeds.summarise({"0": per_seed["0"]})  # one seed has no interval


def test_a_seed_changes_only_the_seed_and_its_own_folders(tmp_path):
    over = dict(kv.split("=", 1) for kv in seeds.seed_overrides(3, tmp_path))
    assert over == {"seed": "3", "data.dir": str(tmp_path / "seed3/data"),
                    "search.index_dir": str(tmp_path / "seed3/index"), "train.runs_dir": str(tmp_path / "seed3/runs")}


def test_recipe_key_follows_the_params_values_and_the_overrides(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\ntrain: {lr: 0.0003}\n")
    key = seeds.recipe_key(params, [])
    assert seeds.recipe_key(params, ["train.lr=1e-4"]) != key
    params.write_text("seed: 0  # a comment is the same recipe\ntrain:\n  lr: 3.0e-4\n")
    assert seeds.recipe_key(params, []) == key
    params.write_text("seed: 0\ntrain: {lr: 0.0001}\n")
    assert seeds.recipe_key(params, []) != key


def test_the_readme_seed_figures_are_of_todays_params_yaml():
    """README quotes make_run_seeds.json as `make run`'s: a recipe change must rerun the benchmark."""
    results = json.loads((BENCH / "results" / "make_run_seeds.json").read_text())
    assert results["overrides"] == [] and sorted(results["per_seed"]) == ["0", "1", "2", "3", "4"]
    assert results["recipe_key"] == seeds.recipe_key(BENCH.parent / "params.yaml", []), (
        "params.yaml changed since benchmarks/results/make_run_seeds.json was measured: rerun "
        "`python -m benchmarks.make_run_seeds --seeds 0,1,2,3,4` and update README's figures")

