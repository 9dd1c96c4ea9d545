"""Every benchmark runs, at micro size, through its own `main(argv)`: a refactor of the library or
of a benchmark cannot break one silently. Results and work files go to this module's tmp folders
(benchmarks/common.py reads $AGENT_R1_BENCH_RESULTS and $AGENT_R1_BENCH_WORK), never into
benchmarks/results or the repository. No figure is asserted, only that each benchmark ran its real
code path and wrote what it writes.

Marked `bench`: `make bench` runs these (`pytest -m bench tests/bench`), `make test` does not (about
260 s of the suite's time on 2 cores, for benchmark code the library's own tests do not depend on).
The benchmarks' readers and argument parsers stay in `make test`: test_bench_readers.py.

The Ray benchmarks (async_speed, scale_grid) run in test_benchmarks_ray_smoke.py, one
unit with the other Ray modules (tests/isolation.py). Benchmarks that a test elsewhere already runs
are listed in COVERED_ELSEWHERE; tests/bench/test_benchmarks_code.py checks that every benchmarks/*.py is
run by one or the other.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import common

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """The benchmarks' results and work folders in tmp (for this module), and the cwd put back
    (learning.py and make_run_seeds.py chdir to the repository, as their figures need)."""
    root = tmp_path_factory.mktemp("bench")
    cwd = os.getcwd()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(common.RESULTS_ENV, str(root / "results"))
        mp.setenv(common.WORK_ENV, str(root / "work"))
        yield root
    os.chdir(cwd)


def written(bench: Path, name: str) -> dict:
    path = bench / "results" / f"{name}.json"
    assert path.exists(), f"{name}.json was not written to the tmp results folder"
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def micro_run(bench):
    """One micro training run (1 iteration, a checkpoint) with its data and index: what
    kill_resume.py resumes."""
    from agent_r1.config import load_config
    from agent_r1.runs.run import run_train

    over = {**common.micro_overrides(bench / "micro", iterations=1), "train.threads": 1}
    run_train(load_config(None, over))
    return Path(over["train.out_dir"])


# ----------------------------------------------------------------------------- training and rollout


def test_learning_smoke(bench):
    from benchmarks import learning

    assert learning.main(["--smoke", "--work", str(bench / "learn"), "--variants", "grpo,dapo"]) == 0
    doc = written(bench, "learning_smoke")
    assert doc["per_seed"]["0"]["runs"]["grpo"]["iterations"] == 1 and "warm_start" in doc["summary"]
    assert doc["summary"]["dapo"]["minus_grpo_ci95"]["seeds"] == 1  # paired with GRPO on the same seed
    # DAPO's curve records the prompts its dynamic sampling rolled out (at least the smoke's 2 per iteration)
    (dapo_it,) = doc["per_seed"]["0"]["runs"]["dapo"]["train_curve"]
    assert dapo_it["dynamic/prompts_sampled"] >= 2 and dapo_it["dynamic/rounds"] >= 1
    assert "dynamic/prompts_sampled" not in doc["per_seed"]["0"]["runs"]["grpo"]["train_curve"][0]


def test_learning_endpoint_rows_smoke(bench):
    """The endpoint rows on the micro world: the chat recipe's warm start, GRPO in the built-in hermes env and
    through the endpoint's openai agent, paired, with seconds per iteration and the endpoint's overhead."""
    from benchmarks import learning

    out = bench / "results" / "learning_endpoint_smoke.json"
    assert learning.main(["--smoke", "--chat", "--iterations", "3", "--work", str(bench / "learn_endpoint"),
                          "--variants", "grpo_hermes,grpo_endpoint", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    seed = doc["per_seed"]["0"]
    check = seed["episodes_check"]  # a 2-step warm start writes no valid call, but the prompts are the env's
    assert check["prompts_identical"] == check["questions"] == 4
    endpoint = seed["runs"]["grpo_endpoint"]
    assert endpoint["greedy_agent"]["n"] == 4 and "agent/drift" in endpoint["train_curve"][-1]
    assert endpoint["episodes_check"]["prompts_identical"] == 4  # the trained policy's, too
    assert "agent/drift" not in seed["runs"]["grpo_hermes"]["train_curve"][-1]
    summary = doc["summary"]["grpo_endpoint"]
    assert summary["minus_grpo_hermes_ci95"]["seeds"] == 1
    assert summary["overhead_s_per_iteration_over_grpo_hermes"]["seeds"] == 1
    assert doc["summary"]["grpo_hermes"]["seconds_per_iteration"]["mean"] > 0
    with pytest.raises(SystemExit, match="need --chat"):
        learning.main(["--smoke", "--work", str(bench / "learn_endpoint_tag"), "--variants", "grpo_endpoint",
                       "--out", str(bench / "results" / "unused.json")])


def test_perf_rollout_update_and_profile_smoke(bench):
    from benchmarks import perf_rollout, perf_update, profile_iteration

    assert perf_rollout.main(["--smoke", "--prompts", "2"]) == 0
    assert set(written(bench, "perf_rollout")) >= {"overhead", "speedups", "scaling", "machine"}
    assert perf_update.main(["--smoke"]) == 0
    assert written(bench, "perf_update")["trainer_over_bare"]["runs"]
    assert profile_iteration.main(["--smoke", "--iterations", "1"]) == 0
    assert written(bench, "profile")["sections"] and (bench / "results" / "profile.md").exists()


def test_perf_trl_smoke(bench):
    from benchmarks import perf_trl

    if importlib.util.find_spec("trl") is None:  # the bench extra: `make bench` installs it, `make test` does not
        assert perf_trl.main(["--smoke"]) == 1
        assert "trl is not installed" in written(bench, "perf_trl")["error"]
        return
    assert perf_trl.main(["--smoke", "--modes", "equal_work", "--micro", "2", "--skip-cells", ""]) == 0
    assert "error" not in written(bench, "perf_trl")["modes"]["equal_work"]


def test_kill_resume_smoke(bench, micro_run):
    from benchmarks import kill_resume

    # the calibration run only, on the micro run's data and index: the kill-and-resume trials are
    # tests/reliability/test_kill_resume.py's
    assert kill_resume.main(["--trials", "0", "--iterations", "1", "--work", str(micro_run.parent)]) == 0
    doc = written(bench, "kill_resume")
    assert doc["trials"] == 0 and doc["uninterrupted_loop_seconds"] > 0


def test_precision_speed_smoke(bench):
    from benchmarks import precision_speed

    assert precision_speed.main(["--smoke"]) == 0
    native = written(bench, "precision_speed")["native"]
    assert native["auto_resolves_to"] in ("fp32", "bf16") and native["sft"]["fp32"]["steps"] == 2
    assert {"fp32", "bf16"} <= native["rl"].keys() and native["rl"]["fp32"]["action_tokens"]


def test_gpu_smoke_tiny_on_cpu(bench):
    from benchmarks import gpu_smoke

    assert gpu_smoke.main(["--tiny", "--device", "cpu", "--runs", "transformers_full", "--iterations", "1",
                           "--prompts", "1", "--tokens-per-turn", "4", "--threads", "1", "--precision", "fp32",
                           "--people", "60"]) == 0
    assert "error" not in written(bench, "gpu_smoke_cpu_tiny")["runs"]["transformers_full"]


def test_memory_one_configuration(bench):
    from benchmarks import memory

    assert memory.main(["--smoke"]) == 0
    (result,) = written(bench, "memory")["results"].values()
    assert result["peak_rss_mib"] > 0 and result["tokens"] == 4 * 128


# ----------------------------------------------------------------------------- retrieval
def test_retrieval_smoke(bench):
    from benchmarks import retrieval

    assert retrieval.main(["--questions", "10", "--repeats", "1", "--es-repeats", "1", "--dense-repeats", "1"]) == 0
    doc = written(bench, "retrieval")
    assert {"tantivy", "elasticsearch", "top1_agreement"} <= set(doc)


def test_retriever_load_smoke(bench):
    from benchmarks import retriever_load

    assert retriever_load.main(["--processes", "1", "--seconds", "0.5", "--tantivy-questions", "10"]) == 0
    assert retriever_load.main(["--backend", "elasticsearch", "--questions", "5", "--workers", "1",
                                "--threads", "1", "--pool-size", "1", "--seconds", "0.5"]) == 0
    doc = written(bench, "retriever_load")
    assert doc["queries"] > 0 and doc["elasticsearch_workers"]["runs"][0]["queries"] > 0


# ----------------------------------------------------------------------------- reliability
def test_reliability_smoke(bench):
    from benchmarks import reliability

    one = "tests/envs/test_env.py::test_tool_runner_clips_huge_results"
    assert reliability.main(["--cases", "60", "--parse-cases", "20", "--fault-tests", one]) == 0
    doc = written(bench, "reliability")
    assert doc["inputs_failed"] == 0 and doc["fault_tests"]["handled"] == 1


# ----------------------------------------------------------------------------- whole-project timings
def _fake_clone(tmp_path: Path, recipe: str) -> Path:
    """An 'installed clone' whose Makefile target stands in for make test / make run."""
    clone = tmp_path / "clone"
    (clone / ".venv").mkdir(parents=True)
    (clone / ".venv" / ".installed").touch()
    (clone / "Makefile").write_text(recipe)
    subprocess.run(["git", "init", "-q"], cwd=clone, check=True)
    return clone


def test_suite_time_on_a_stand_in_clone(bench, tmp_path):
    from benchmarks import suite_time

    clone = _fake_clone(tmp_path, "TEST_WORKERS ?= 3\ntest:\n\t@echo '0.50s call     tests/test_a.py::test_x'\n"
                                  "\t@echo '1 passed in 0.60s'\n\t@echo 'workers $(TEST_WORKERS)' >&2\n")
    out = ["--out", str(bench / "results" / "suite_time.json")]
    assert suite_time.main(["--clone", str(clone), *out]) == 0
    doc = written(bench, "suite_time")
    assert doc["modules"] == {"tests/test_a.py": 0.5} and doc["sessions"] == [{"seconds": 0.6, "passed": 1}]
    assert doc["workers"] == 3 and doc["command"] == "make test"  # the Makefile's default, read from it
    assert suite_time.main(["--clone", str(clone), "--workers", "2", *out]) == 0
    doc = written(bench, "suite_time")
    assert doc["workers"] == 2 and doc["command"] == "make test TEST_WORKERS=2"
    assert "workers 2" in (bench / "results" / "logs" / "suite_time.log").read_text()  # make got it




def test_make_run_seeds_bookkeeping(bench, monkeypatch):
    """The sweep's own code (recipe key, per-seed rows, summary, the results file) around a stand-in
    for the flow run (tests/integration/test_flow.py runs the flow itself)."""
    from benchmarks import make_run_seeds

    def flow(cmd, env):
        summary = Path(cmd[cmd.index("--summary") + 1])
        run_dir = summary.parent / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward_mean": 0.5, "em": 50.0}) + "\n")
        seed = int(next(kv for kv in cmd if kv.startswith("seed=")).split("=")[1])
        summary.write_text(json.dumps({"start_em": 10.0, "final_em": 60.0 + seed, "eval_questions": 4,
                                       "run_dir": str(run_dir)}))

    monkeypatch.setattr(make_run_seeds, "run_flow", flow)
    assert make_run_seeds.main(["--seeds", "0,1"]) == 0
    doc = written(bench, "make_run_seeds")
    assert doc["summary"]["seeds"] == 2 and doc["per_seed"]["1"]["lift"] == 51.0


def test_vllm_rollout_transformers_half(bench):
    """vllm_rollout.py's vLLM half needs .venv-vllm; here the transformers engine's multi-turn rollouts."""
    from benchmarks import vllm_rollout

    assert vllm_rollout.main(["--smoke", "--engines", "transformers", "--prompts", "1", "--repeats", "1"]) == 0
    doc = written(bench, "vllm_rollout_smoke")
    (run,) = doc["engines"]["transformers"]["runs"]
    assert run["trajectories"] == 2 and run["sampled_tokens"] > 0 and doc["equal_work"] is False  # one engine
    assert doc["work"]["rollout"]["max_turns"] == 2
