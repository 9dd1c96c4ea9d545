"""The evaluation harness: the three modes on a tiny real model over a synthetic world with a real
tantivy index, metrics on hand-made trajectories, `agent-r1 eval --json`, MLflow logging, the
question-file formats of the real sample data (samples/), and the micro paper table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.config import load_config
from agent_r1.evaluation.agent_eval import trajectory_stats
from agent_r1.evaluation.harness import (
    evaluate_datasets,
    evaluate_model,
    format_table,
    load_question_set,
    log_to_mlflow,
    parse_question_specs,
)
from agent_r1.evaluation.modes import EVAL_MODES, EvalContext, get_mode
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.trajectory import Trajectory, Turn
from tests.conftest import REPO, SAMPLES
from tests.mlflow_store import fresh_store

BUDGET = {"rollout.max_turns": 2, "rollout.max_tokens_per_turn": 12, "rollout.max_total_tokens": 400,
          "train.threads": 1, "search.k": 2}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A small synthetic world, its tantivy index and a tiny saved model (1 layer, 32 wide)."""
    import torch

    from agent_r1.data.synthetic import SyntheticConfig, write_synthetic
    from agent_r1.models.build import ModelConfig, build_local_model, save_model
    from agent_r1.runs.run import Run

    root = tmp_path_factory.mktemp("evalworld")
    write_synthetic(0, root / "data", SyntheticConfig(n_people=30, n_cities=6, n_countries=3, n_landmarks=4))
    # the world's index, as a run builds it (a prepared folder: data.source names no generator)
    Run(load_config(None, {"data.source": "local", "data.dir": str(root / "data"), "search.backend": "tantivy",
                           "search.index_dir": str(root / "index"), "train.runs_dir": str(root / "runs")})).index_dir
    texts = [json.loads(line)["text"] for line in (root / "data" / "corpus.jsonl").read_text().splitlines()]
    torch.manual_seed(0)
    model, tok = build_local_model(texts, ModelConfig(hidden_size=32, num_layers=1, num_heads=2,
                                                      intermediate_size=64, vocab_size=300))
    save_model(model, tok, root / "model")
    cfg = load_config(None, {**BUDGET, "search.index_dir": str(root / "index")})
    return {"root": root, "cfg": cfg, "test": root / "data" / "test.jsonl", "model": root / "model"}


def test_modes_are_registered_by_name():
    assert {"agent", "rag", "direct"} <= set(EVAL_MODES)
    with pytest.raises(ValueError, match="unknown evaluation mode"):
        get_mode("oracle")


def test_each_mode_on_a_tiny_real_model(world):
    samples = {"test": load_question_set(world["test"], 5)}
    report = evaluate_model(world["model"], world["cfg"], samples, ["agent", "rag", "direct"],
                            keep_trajectories=True)
    ro = world["cfg"].rollout
    for mode in ("agent", "rag", "direct"):
        trajs = report["trajectories"][mode]["test"]
        stats = report["results"][mode]["test"]
        assert len(trajs) == 5 and stats["n"] == 5
        assert [t.sample_id for t in trajs] == [s["id"] for s in samples["test"]]  # one per question, in order
        for t in trajs:
            assert 1 <= len(t.turns) <= (ro.max_turns if mode == "agent" else 1)
            assert len(t.token_ids) <= ro.max_total_tokens
            assert all(len(turn.action_ids) <= ro.max_tokens_per_turn for turn in t.turns)
        for key in ("em", "f1", "substring_em", "mean_turns", "tool_calls_per_question", "valid_call_rate",
                    "budget_hits", "answer_format_failures"):
            assert key in stats
    tok = report["tokenizer"]
    # naive RAG: the top-k documents of the question itself are in the prompt; direct has none
    rag = report["trajectories"]["rag"]["test"][0]
    titles = rag.turns[0].info["retrieved_titles"]
    assert len(titles) == 2 and all(title in tok.decode(rag.prompt_ids) for title in titles)
    assert "Doc 1" not in tok.decode(report["trajectories"]["direct"]["test"][0].prompt_ids)
    assert report["results"]["direct"]["test"]["tool_calls_per_question"] == 0
    # greedy is deterministic: the same call gives the same actions
    again = evaluate_model(world["model"], world["cfg"], samples, ["rag"], keep_trajectories=True)
    assert ([t.turns[0].action_ids for t in again["trajectories"]["rag"]["test"]]
            == [t.turns[0].action_ids for t in report["trajectories"]["rag"]["test"]])


class ScriptedEngine:
    """Answers every prompt with the same text (tokenised): exercises parsing, not the model."""

    def __init__(self, tokenizer, text: str):
        self.ids = tokenizer.encode(text, add_special_tokens=False)

    def generate(self, prompts, params):
        return [GenerationOutput(list(self.ids), [0.0] * len(self.ids), "stop") for _ in prompts]


@pytest.mark.parametrize("text, em, fails", [("<answer>Telumas</answer>", 50.0, 0.0), ("Telumas", 50.0, 4.0)])
def test_single_turn_answer_parsing(world, text, em, fails):
    from agent_r1.models.build import load_model
    from agent_r1.rollout.chat import ChatCodec

    _, tok = load_model(world["model"])
    samples = [{"id": f"q{i}", "question": f"Where was Karo{i} born?", "answers": [a]}
               for i, a in enumerate(["Telumas", "the telumas", "Orvania", "Bamena"])]
    ctx = EvalContext(engine=ScriptedEngine(tok, text), codec=ChatCodec(tok), cfg=world["cfg"])
    trajs = get_mode("direct")(ctx, samples)
    stats = trajectory_stats(trajs)
    assert [t.answer for t in trajs] == ["Telumas"] * 4  # the raw text is scored when the tag is missing
    assert stats["em"] == em and stats["answer_format_failures"] == fails
    assert stats["budget_hits"] == 0  # a missing tag is a format failure, not a budget hit
    assert [t.outcome_reward for t in trajs] == [1.0, 1.0, 0.0, 0.0]


def _traj(answer, golds, turns, stop="answer", supports=()):
    t = Trajectory(sample_id="x", prompt_ids=[1], answer=answer, stop_reason=stop,
                   sample={"answers": golds, "supporting_titles": list(supports)})
    t.turns = [Turn(action_ids=[2], action_logprobs=[0.0], action_text="", tool_calls=c, valid_tool_calls=v,
                    info={"retrieved_titles": list(r)}) for c, v, r in turns]
    return t


def test_metrics_on_crafted_trajectories():
    trajs = [
        _traj("Paris", ["paris"], [(1, 1, ["A"]), (0, 0, [])], supports=["A", "B"]),  # EM, searched first
        _traj("the city of Paris", ["Paris"], [(2, 1, ["B"]), (0, 0, [])], supports=["B"]),  # substring only
        _traj(None, ["Rome"], [(1, 0, []), (1, 1, ["C"])], stop="max_turns", supports=["C"]),  # budget hit
        _traj("Lyon", ["Rome"], [(0, 0, [])]),  # answered at once, wrong
    ]
    s = trajectory_stats(trajs)
    assert s["n"] == 4
    assert s["em"] == 25.0
    assert s["substring_em"] == 50.0
    assert s["f1"] == pytest.approx(100 * (1 + 0.5) / 4)  # "city of paris" vs "paris": P 1/3, R 1
    assert s["search_first_rate"] == 75.0
    assert s["mean_turns"] == 7 / 4
    assert s["tool_calls_per_question"] == 5 / 4
    assert s["valid_call_rate"] == 60.0
    assert s["budget_hits"] == 1 and s["answer_format_failures"] == 1
    assert s["support_recall"] == pytest.approx(100 * (0.5 + 1 + 1) / 3)  # only samples with supports
    table = format_table({"results": {"agent": {"toy": s}}})
    assert "| agent | toy | 4 | 25.0 |" in table


def test_cli_eval_writes_json(world, tmp_path, capsys):
    from agent_r1.cli import main

    out = tmp_path / "eval.json"
    questions = f"{world['test']},dev={world['root'] / 'data' / 'dev.jsonl'}"
    argv = ["eval", "--model", str(world["model"]), "--questions", questions,
            "--index", str(world["root"] / "index"), "--mode", "agent,rag,direct", "-n", "3", "--json", str(out)]
    for key, value in BUDGET.items():
        argv += ["--set", f"{key}={value}"]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert set(report["results"]) == {"agent", "rag", "direct"}
    assert set(report["results"]["agent"]) == {"test", "dev"}
    assert all(ds["n"] == 3 for per in report["results"].values() for ds in per.values())
    assert "| agent | test | 3 |" in capsys.readouterr().out
    assert main(["eval", "--model", str(world["model"]), "--questions", str(world["test"]), "--mode", "rag",
                 "--index", str(tmp_path / "missing")]) == 2  # a clear error, not a traceback


def test_log_to_mlflow_only_inside_an_active_run(tmp_path, monkeypatch):
    import mlflow
    monkeypatch.setenv("MLFLOW_TRACKING_URI", fresh_store(tmp_path))
    monkeypatch.chdir(tmp_path)  # a SQLite store's default artifact root is ./mlruns of the cwd
    report = {"results": {"rag": {"hotpotqa": {"em": 12.5, "n": 8.0}}}}
    assert log_to_mlflow(report) is False  # no active run: nothing logged, nothing started
    with mlflow.start_run() as run:
        assert log_to_mlflow(report) is True
    metrics = mlflow.tracking.MlflowClient().get_run(run.info.run_id).data.metrics
    assert metrics["eval/rag/hotpotqa/em"] == 12.5


def test_sample_question_files_load_in_their_own_formats():
    specs = parse_question_specs(",".join(str(SAMPLES / f) for f in (
        "hotpotqa/hotpotqa_dev_distractor_400.jsonl", "2wiki.questions.jsonl", "musique.questions.jsonl",
        "bamboogle.questions.jsonl")))
    assert list(specs) == ["hotpotqa", "2wiki", "musique", "bamboogle"]
    for name, path in specs.items():
        rows = load_question_set(path, 3)
        assert len(rows) == 3 and all(r["question"] and r["answers"] for r in rows)
        assert rows[0]["source"] == name
    assert load_question_set(specs["hotpotqa"], 1)[0]["supporting_titles"]  # retrieval recall needs these


def test_direct_mode_needs_no_index_but_agent_does(world):
    cfg = world["cfg"]
    samples = {"test": load_question_set(world["test"], 2)}
    from agent_r1.models.build import load_model
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.engine import TransformersEngine

    model, tok = load_model(world["model"])
    engine, codec = TransformersEngine(model, tok), ChatCodec(tok)
    assert evaluate_datasets(engine, codec, cfg, samples, ["direct"])["results"]["direct"]["test"]["n"] == 2
    with pytest.raises(ValueError, match="needs a retriever"):
        evaluate_datasets(engine, codec, cfg, samples, ["agent"])


def test_micro_paper_table_from_real_runs(tmp_path):
    """Micro mode covers: one real SFT warm start (5 steps, a 1-layer model), the three baselines
    (direct, rag, agent) and two RL methods (PPO, GRPO), one training iteration each, greedy eval on
    4 in-domain and 4 out-of-domain (comparison) questions, and the real-data harness on 2 questions
    per sample file (samples/, tracked, so always there). It checks the table is produced from those runs, not the scores."""
    from benchmarks import paper_table
    assert paper_table.main(["--micro", "--work", str(tmp_path), "--threads", "1", "--real-n", "2"]) == 0
    res = json.loads((tmp_path / "results" / "paper_table.json").read_text())
    md = (tmp_path / "results" / "paper_table.md").read_text()
    one = res["per_seed"]["0"]
    assert res["seeds"] == [0] and set(one["baselines"]) == {"direct", "rag", "agent"}
    assert set(one["methods"]) == {"ppo", "grpo"}
    for row in list(one["baselines"].values()) + list(one["methods"].values()):
        assert row["label"] in md
        assert {d: s["n"] for d, s in row["metrics"].items()} == {"synthetic_test": 4, "synthetic_comparison_ood": 4}
        # the per-question scores behind the intervals agree with the EM of the same evaluation
        for ds, scores in row["em_per_question"].items():
            assert len(scores) == 4 and 100 * sum(scores) / 4 == row["metrics"][ds]["em"]
    for run in one["methods"].values():
        assert run["iterations"] == 1 and Path(run["checkpoint"]).exists()  # a real training run
        assert (Path(run["checkpoint"]).parents[1] / "metrics.jsonl").exists()
    assert "## Which differences the intervals support" in md and "| GRPO - Agent, SFT warm start" in md
    assert len(res["config_hash"]) == 12 and res["wall_seconds"] > 0
    assert (REPO / one["warm_start"] if not Path(one["warm_start"]).is_absolute()
            else Path(one["warm_start"])).joinpath("config.json").exists()
    ood = [json.loads(line) for line in (tmp_path / "seed0" / "ood" / "comparison_test.jsonl").read_text().splitlines()]
    assert ood and all(q["type"] == "comparison" for q in ood)
    train = (tmp_path / "seed0" / "data" / "train.jsonl").read_text()
    assert '"comparison"' not in train  # never trained on
    # the samples are tracked, so the real-data part always runs, on every sample file
    assert set(res["real"]["reports"]["SFT warm start"]["results"]["rag"]) == {"hotpotqa", "2wiki", "musique",
                                                                                "bamboogle"}

    # a second call with the same setup keeps what the first one ran (no retraining) and adds the rest
    logs = {m: (Path(run["checkpoint"]).parents[1] / "metrics.jsonl").stat().st_mtime_ns for m, run in one["methods"].items()}
    assert paper_table.main(["--micro", "--work", str(tmp_path), "--threads", "1", "--real-n", "0",
                             "--methods", "grpo,rloo"]) == 0
    again_doc = json.loads((tmp_path / "results" / "paper_table.json").read_text())
    again = again_doc["per_seed"]["0"]
    assert set(again["methods"]) == {"ppo", "grpo", "rloo"}
    # its wall time adds to the first call's: the header's total covers every call that filled the table
    first_s, second_s = again_doc["wall_seconds_per_call"]
    assert first_s == res["wall_seconds"] and second_s > 0
    assert again_doc["wall_seconds"] == pytest.approx(first_s + second_s, abs=0.11)
    assert {m: again["methods"][m]["em_per_question"] for m in logs} == {m: one["methods"][m]["em_per_question"] for m in logs}
    assert {m: (Path(again["methods"][m]["checkpoint"]).parents[1] / "metrics.jsonl").stat().st_mtime_ns
            for m in logs} == logs
    assert again["methods"]["rloo"]["iterations"] == 1

    # a run that dies in its first new method leaves every kept result in the file (each save holds them)
    def killed(*args, **kwargs):
        raise RuntimeError("killed while training")

    paper_table.run_method = killed
    with pytest.raises(RuntimeError, match="killed while training"):
        paper_table.main(["--micro", "--work", str(tmp_path), "--threads", "1", "--real-n", "0",
                          "--methods", "reinforce_pp"])
    after = json.loads((tmp_path / "results" / "paper_table.json").read_text())["per_seed"]["0"]
    assert set(after["methods"]) == {"ppo", "grpo", "rloo"}
    assert set(after["baselines"]) == {"direct", "rag", "agent"}

    # --render-only rewrites the markdown from the JSON alone
    md_path = tmp_path / "results" / "paper_table.md"
    md_path.unlink()
    assert paper_table.main(["--micro", "--work", str(tmp_path), "--render-only"]) == 0
    assert "| RLOO |" in md_path.read_text()
    assert (tmp_path / "results" / "paper_table.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
