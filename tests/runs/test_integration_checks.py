"""Start-of-run checks wired into the entry points: a model folder without a chat template, a sample
whose own env loosens the run's limits, and the retriever's request timeout. Each fails at start,
naming the input, instead of deep inside the first rollout or iteration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.config import load_config
from agent_r1.data.io import RowError


def _save_without_template(tiny_model, out: Path) -> Path:
    """A model folder saved by the project's own builder, then stripped of its chat template (the
    state of a base model's folder, or of one copied without chat_template.jinja)."""
    from agent_r1.models.build import save_model

    model, tok = tiny_model
    save_model(model, tok, out)
    (out / "chat_template.jinja").unlink(missing_ok=True)
    config_file = out / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config.pop("chat_template", None)
    config_file.write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def bare_folder(tiny_model, tmp_path_factory):
    return _save_without_template(tiny_model, tmp_path_factory.mktemp("models") / "base-no-template")


def test_training_refuses_a_folder_without_chat_template(bare_folder):
    from agent_r1.runs.run import Run

    cfg = load_config(None, {"train.init_from": str(bare_folder), "env.format": "hermes"})
    with pytest.raises(ValueError, match=r"base-no-template.*has no chat template.*env.format=hermes"):
        Run(cfg).policy(cfg.train.init_from)


def test_training_loads_a_folder_with_its_template(tiny_model, tmp_path):
    from agent_r1.models.build import save_model
    from agent_r1.runs.run import Run

    folder = save_model(*tiny_model, tmp_path / "with-template")
    cfg = load_config(None, {"train.init_from": str(folder), "env.format": "tag"})
    _, tok = Run(cfg).policy(cfg.train.init_from)
    assert tok.chat_template == tiny_model[1].chat_template


def test_evaluation_refuses_a_folder_without_chat_template(bare_folder, tmp_path):
    from agent_r1.evaluation.harness import evaluate_model

    cfg = load_config(None, {"env.format": "hermes"})
    samples = {"toy": [{"id": "q1", "question": "Where was Karivo born?", "answers": ["Telumas"]}]}
    # `direct` needs no index: the error must come from the template, before any generation
    with pytest.raises(ValueError, match=r"base-no-template.*has no chat template"):
        evaluate_model(bare_folder, cfg, samples, modes=["direct"], index_dir=tmp_path / "unused")


def _prepared_data(d: Path, env_of_row: dict) -> Path:
    d.mkdir(parents=True)
    rows = [{"id": f"q{i}", "question": f"Where was person {i} born?", "answers": ["Telumas"]} for i in range(3)]
    rows[1]["env"] = env_of_row
    (d / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "test.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (d / "corpus.jsonl").write_text(json.dumps({"id": "d1", "title": "Karivo", "text": "Karivo was born in Telumas."})
                                    + "\n")
    return d


def test_load_samples_holds_rows_to_the_runs_env(tmp_path):
    from agent_r1.runs.assembly import load_samples

    data = _prepared_data(tmp_path / "data", {"max_calls_per_turn": 9})
    cfg = load_config(None, {"env.max_calls_per_turn": 4})
    assert len(load_samples(data / "train.jsonl")) == 3  # without the run's config: shape checks only
    with pytest.raises(RowError, match=r"train\.jsonl:2.*max_calls_per_turn"):
        load_samples(data / "train.jsonl", cfg=cfg)
    tighter = _prepared_data(tmp_path / "tighter", {"max_calls_per_turn": 2})
    assert load_samples(tighter / "train.jsonl", cfg=cfg)[1]["env"]["max_calls_per_turn"] == 2


def test_training_fails_at_load_on_a_row_that_loosens_the_runs_env(tmp_path):
    from agent_r1.runs.run import Run

    data = _prepared_data(tmp_path / "data", {"max_calls_per_turn": 9})
    cfg = load_config(None, {
        "data.source": "prepared", "data.dir": str(data), "search.index_dir": str(tmp_path / "index"),
        "train.out_dir": str(tmp_path / "run"), "train.runs_dir": str(tmp_path / "runs"), "env.max_calls_per_turn": 4,
        "model.hidden_size": 16, "model.num_layers": 1, "model.num_heads": 2, "model.intermediate_size": 32,
        "model.vocab_size": 300})
    with pytest.raises(RowError, match=r"train\.jsonl:2.*max_calls_per_turn"):
        Run(cfg).parts()


def test_run_retriever_requests_time_out_within_the_tool_timeout(tmp_path):
    from agent_r1.retrieval.base import SearchConfig, write_manifest
    from agent_r1.runs.assembly import open_run_index

    write_manifest(SearchConfig(backend="elasticsearch", url="http://127.0.0.1:9", index_dir=str(tmp_path)))
    cfg = load_config(None, {"search.timeout_s": 2.5})
    retriever = open_run_index(cfg, tmp_path, check=False)  # no server: only the client is built
    try:
        assert retriever.config.timeout_s == 2.5
    finally:
        retriever.close()


def test_the_projects_own_template_passes_the_hermes_check(tiny_model):
    """The locally built template lists tools only inside a system turn (the env always sends one):
    the check must accept it, or every hermes run on a local model would fail at start."""
    from agent_r1.models.checks import check_chat_template

    check_chat_template(tiny_model[1], "local", "hermes")
