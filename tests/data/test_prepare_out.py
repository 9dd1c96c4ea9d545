"""`agent-r1 prepare <dataset> --out DIR` writes only into a folder it made for that dataset:
never over a user's own questions.jsonl, never into a folder another command made (a run folder, a
synthetic world, another dataset's), and a re-prepare leaves no stale file of its previous output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.cli import main as cli_main
from agent_r1.data.owned import MARKER, mark_made

OFFICIAL = {"_id": "w1", "type": "compositional", "question": "Where?", "answer": "Paris",
            "supporting_facts": [["F", 0]], "context": [["F", ["f."]], ["G", ["g."]]]}
QUESTIONS_ONLY = {"question": "Where?", "answer": ["Paris"]}


def _input(tmp_path: Path, name: str, row: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(row) + "\n")
    return path


def _prepare(dataset: str, src: Path, out: Path) -> int:
    return cli_main(["prepare", dataset, "--input", str(src), "--out", str(out)])


def test_a_users_own_files_are_never_written_over(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "questions.jsonl").write_text("my hand-written questions\n")
    assert _prepare("2wiki", _input(tmp_path, "w.jsonl", OFFICIAL), out) != 0
    assert "--out" in capsys.readouterr().err
    assert (out / "questions.jsonl").read_text() == "my hand-written questions\n"
    assert sorted(p.name for p in out.iterdir()) == ["questions.jsonl"]


@pytest.mark.parametrize("maker", ["train.out_dir", "data.dir", "agent-r1 prepare musique"])
def test_a_folder_another_command_made_is_refused(tmp_path, capsys, maker):
    out = tmp_path / "theirs"
    out.mkdir()
    mark_made(out, maker)
    (out / "questions.jsonl").write_text("theirs\n")
    assert _prepare("2wiki", _input(tmp_path, "w.jsonl", OFFICIAL), out) != 0
    err = capsys.readouterr().err
    assert maker in err, err
    assert (out / "questions.jsonl").read_text() == "theirs\n"


def test_its_own_folder_is_prepared_again_without_stale_files(tmp_path):
    out = tmp_path / "wiki"
    assert _prepare("2wiki", _input(tmp_path, "w.jsonl", OFFICIAL), out) == 0
    assert (out / "corpus.jsonl").exists() and (out / MARKER).exists()
    # the same dataset again, questions only: the corpus of the last time is not left beside them
    assert _prepare("2wiki", _input(tmp_path, "q.jsonl", QUESTIONS_ONLY), out) == 0
    assert not (out / "corpus.jsonl").exists(), "a stale corpus.jsonl was left beside new questions"
    assert len((out / "questions.jsonl").read_text().splitlines()) == 1
