"""Loaders on the real sample files (samples/), plus every kind of bad input on small temp files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.cli import main as cli_main
from agent_r1.data.io import iter_records, write_jsonl
from agent_r1.data.loaders import (
    LOADERS,
    LoadReport,
    load_2wiki,
    load_hotpotqa,
    load_musique,
    load_questions_jsonl,
)
from agent_r1.data.schema import QASample
from tests.conftest import SAMPLES
from tests.es_fixture import HOTPOTQA_400, require_sample


def _write(path: Path, lines: list[str] | bytes) -> Path:
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list:
    return [rec.value for rec in iter_records(path)]


def _hp_row(i: int, **over) -> dict:
    row = {"_id": f"q{i}", "question": f"Question {i}?", "answer": f"ans{i}", "type": "bridge",
           "level": "hard", "supporting_facts": [["A", 0], ["B", 1], ["A", 2]],
           "context": [["A", ["a0.", " a1."]], ["B", ["b0."]]]}
    row.update(over)
    return row


# ------------------------------------------------------------------ real sample data (samples/)

def test_hotpotqa_real_400():
    samples = load_hotpotqa(require_sample(HOTPOTQA_400))
    assert len(samples) == 400
    first = samples[0]
    assert first.id == "5a8c7595554299585d9e36b6"
    assert first.answers == ["Chief of Protocol"]
    assert first.supporting_titles == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    assert first.type == "bridge" and first.source == "hotpotqa" and first.meta == {"level": "hard"}
    assert {s.type for s in samples} == {"bridge", "comparison"}
    assert all(1 <= len(s.supporting_titles) <= 4 for s in samples)
    assert len({s.id for s in samples}) == 400


@pytest.mark.parametrize("name,n", [("2wiki", 200), ("musique", 200), ("bamboogle", 125)])
def test_questions_only_real_files(name: str, n: int):
    path = require_sample(SAMPLES / f"{name}.questions.jsonl")
    samples = LOADERS[name](path)
    assert len(samples) == n
    assert all(s.source == name and s.answers and s.question for s in samples)
    assert samples[0].id.startswith(f"{name}-")
    # ids are content-derived: reloading gives the same ids
    assert [s.id for s in LOADERS[name](path)] == [s.id for s in samples]
    if name == "2wiki":
        assert "New York City" in samples[0].answers and len(samples[0].answers) == 8


def test_registry_names_the_datasets():
    assert {"hotpotqa", "2wiki", "musique"} <= set(LOADERS)
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        LOADERS["nope"]("x.jsonl")


# ------------------------------------------------------------------ formats

def test_json_array_file(tmp_path: Path):
    path = tmp_path / "hp.json"
    path.write_text(json.dumps([_hp_row(1), _hp_row(2)]), encoding="utf-8")
    samples = load_hotpotqa(path)
    assert [s.id for s in samples] == ["q1", "q2"]
    assert samples[0].supporting_titles == ["A", "B"]  # dedup in order


def test_musique_official_format(tmp_path: Path):
    row = {"id": "2hop__1_2", "question": "Who?", "answer": "X", "answer_aliases": ["Mr X", "X"],
           "answerable": True,
           "paragraphs": [{"idx": 0, "title": "T1", "paragraph_text": "p", "is_supporting": True},
                          {"idx": 1, "title": "T2", "paragraph_text": "q", "is_supporting": False}]}
    s = load_musique(_write(tmp_path / "m.jsonl", [json.dumps(row)]))[0]
    assert s.id == "2hop__1_2" and s.answers == ["X", "Mr X"] and s.supporting_titles == ["T1"]
    assert s.type == "2hop" and s.meta == {"answerable": True}


def test_2wiki_official_format(tmp_path: Path):
    row = {"_id": "abc", "type": "compositional", "question": "Where?", "answer": "Paris",
           "supporting_facts": [["F", 0], ["G", 0]], "context": [["F", ["f."]], ["G", ["g."]]]}
    s = load_2wiki(_write(tmp_path / "w.jsonl", [json.dumps(row)]))[0]
    assert (s.id, s.answers, s.supporting_titles, s.type) == ("abc", ["Paris"], ["F", "G"], "compositional")


def test_questions_jsonl_roundtrip(tmp_path: Path):
    samples = [QASample(id="a", question="q?", answers=["x"], supporting_titles=["T"], source="synthetic",
                        plan=["search T"], meta={"k": 1})]
    path = tmp_path / "questions.jsonl"
    assert write_jsonl(path, samples) == 1
    assert load_questions_jsonl(path) == samples
    assert read_jsonl(path)[0]["plan"] == ["search T"]


# ------------------------------------------------------------------ bad input

def test_malformed_line_names_file_and_line(tmp_path: Path):
    path = _write(tmp_path / "bad.jsonl", [json.dumps(_hp_row(1)), "{not json", json.dumps(_hp_row(3))])
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: malformed JSON.*fix:"):
        load_hotpotqa(path)
    report = LoadReport()
    samples = load_hotpotqa(path, skip_bad=True, report=report)
    assert [s.id for s in samples] == ["q1", "q3"]
    assert report.n_skipped == 1 and report.skipped[0].line == 2 and report.n_loaded == 2


def test_missing_field(tmp_path: Path):
    row = _hp_row(2)
    del row["answer"]
    path = _write(tmp_path / "miss.jsonl", [json.dumps(_hp_row(1)), json.dumps(row)])
    with pytest.raises(ValueError, match=r"miss\.jsonl:2: missing field 'answer'.*fix: add 'answer'"):
        load_hotpotqa(path)
    report = LoadReport()
    assert len(load_hotpotqa(path, skip_bad=True, report=report)) == 1 and report.n_skipped == 1


def test_bad_answer_type_and_non_object(tmp_path: Path):
    path = _write(tmp_path / "t.jsonl", ['{"question": "q", "answer": 5}'])
    with pytest.raises(ValueError, match=r"t\.jsonl:1: field 'answer' must be a string or a list"):
        load_2wiki(path)
    path = _write(tmp_path / "arr.jsonl", ['["q", "a"]'])
    with pytest.raises(ValueError, match=r"arr\.jsonl:1: expected a JSON object"):
        load_2wiki(path)


def test_empty_file(tmp_path: Path):
    for content in (b"", b"\n  \n"):
        with pytest.raises(ValueError, match="file is empty"):
            load_hotpotqa(_write(tmp_path / "empty.jsonl", content))
    with pytest.raises(ValueError, match="JSON array is empty"):
        load_hotpotqa(_write(tmp_path / "empty.json", b"[]"))


def test_all_rows_bad_with_skip(tmp_path: Path):
    with pytest.raises(ValueError, match=r"no valid rows \(skipped 2\)"):
        load_hotpotqa(_write(tmp_path / "x.jsonl", ["{", "}"]), skip_bad=True)


def test_duplicate_ids(tmp_path: Path):
    path = _write(tmp_path / "dup.jsonl", [json.dumps(_hp_row(1)), json.dumps(_hp_row(2)),
                                           json.dumps(_hp_row(1))])
    with pytest.raises(ValueError, match=r"dup\.jsonl:3: duplicate id 'q1' \(first on line 1\)"):
        load_hotpotqa(path)
    # questions-only files: the same question twice derives the same id
    path = _write(tmp_path / "dupq.jsonl", ['{"question": "q", "answer": "a"}'] * 2)
    with pytest.raises(ValueError, match="duplicate id"):
        load_2wiki(path)


def test_non_utf8(tmp_path: Path):
    good = json.dumps(_hp_row(1)).encode()
    bad = json.dumps(_hp_row(2, question="caf\u00e9?")).encode().replace(b"\\u00e9", "é".encode("latin-1"))
    path = _write(tmp_path / "latin.jsonl", good + b"\n" + bad + b"\n")
    with pytest.raises(ValueError, match=r"latin\.jsonl:2: not valid UTF-8.*iconv"):
        load_hotpotqa(path)
    assert len(load_hotpotqa(path, skip_bad=True)) == 1
    arr = tmp_path / "latin.json"
    arr.write_bytes(b"[\n" + good + b",\n" + bad + b"\n]")
    with pytest.raises(ValueError, match=r"latin\.json:3: not valid UTF-8"):
        load_hotpotqa(arr)


def test_missing_file(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_hotpotqa(tmp_path / "nope.jsonl")


def test_malformed_json_array(tmp_path: Path):
    path = tmp_path / "broken.json"
    path.write_text('[\n{"_id": "a"},\n{"_id": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.json:\d+: malformed JSON array"):
        load_hotpotqa(path)


# ------------------------------------------------------------------ CLI

def test_prepare_hotpotqa_cli(tmp_path: Path, capsys):
    rows = [json.dumps(_hp_row(1)), "garbage", json.dumps(_hp_row(2))]
    src = _write(tmp_path / "hp.jsonl", rows)
    assert cli_main(["prepare", "hotpotqa", "--input", str(src), "--out", str(tmp_path / "out")]) == 2
    assert "hp.jsonl:2" in capsys.readouterr().err
    assert cli_main(["prepare", "hotpotqa", "--input", str(src), "--out", str(tmp_path / "out"),
                     "--skip-bad"]) == 0
    assert "skipped 1 bad rows" in capsys.readouterr().out
    questions = load_questions_jsonl(tmp_path / "out" / "questions.jsonl")
    assert [q.id for q in questions] == ["q1", "q2"]
    corpus = read_jsonl(tmp_path / "out" / "corpus.jsonl")
    assert [(d["title"], d["text"]) for d in corpus] == [("A", "a0. a1."), ("B", "b0.")]
    assert all(set(d) == {"id", "title", "text"} for d in corpus)


def test_prepare_questions_only_cli(tmp_path: Path):
    src = require_sample(SAMPLES / "musique.questions.jsonl")
    assert cli_main(["prepare", "musique", "--input", str(src), "--out", str(tmp_path)]) == 0
    assert len(load_questions_jsonl(tmp_path / "questions.jsonl")) == 200
    assert not (tmp_path / "corpus.jsonl").exists()


# ------------------------------------------------------------------ hardening

def test_question_length_is_capped_at_load(tmp_path: Path):
    from agent_r1.data.loaders import MAX_QUESTION_CHARS

    big = "Who? " * (MB // 5)  # a 1 MB question
    path = _write(tmp_path / "hp.jsonl", [json.dumps(_hp_row(1)), json.dumps(_hp_row(2, question=big))])
    with pytest.raises(ValueError) as err:
        load_hotpotqa(path)
    msg = str(err.value)
    assert f"{path}:2" in msg and f"{len(big.strip()):,}" in msg and f"{MAX_QUESTION_CHARS:,}" in msg, msg
    assert "MAX_QUESTION_CHARS" in msg
    assert [s.id for s in load_hotpotqa(path, skip_bad=True)] == ["q1"]
    assert len(load_hotpotqa(path, max_question_chars=len(big))) == 2
    own = _write(tmp_path / "questions.jsonl", [json.dumps({"id": "a", "question": big, "answers": ["x"]})])
    with pytest.raises(ValueError, match="questions.jsonl:1: question is"):
        load_questions_jsonl(own)


MB = 1 << 20
DEEP = '{"a": ' * 100_000 + "1" + "}" * 100_000


@pytest.mark.parametrize("bad, reason", [
    (DEEP, "nested too deeply"),
    ('{"_id": "x", "question": "q?", "answer": ' + "7" * 5000 + "}", "4300"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_skip_bad_skips_rows_that_used_to_abort_the_load(tmp_path: Path, bad, reason):
    path = _write(tmp_path / "hp.jsonl", [json.dumps(_hp_row(1)), bad, json.dumps(_hp_row(3))])
    with pytest.raises(ValueError, match=r"hp\.jsonl:2"):
        load_hotpotqa(path)
    report = LoadReport()
    assert [s.id for s in load_hotpotqa(path, skip_bad=True, report=report)] == ["q1", "q3"]
    assert report.skipped[0].line == 2 and reason in str(report.skipped[0])


def test_own_rows_with_fields_of_the_wrong_type_are_bad_rows(tmp_path: Path):
    rows = [{"id": "a", "question": "q?", "answers": ["x"]}, {"id": "b", "question": "q?", "answers": ["x"], "meta": []},
            {"id": "c", "question": 5, "answers": ["x"]}, {"id": "d", "question": "q?", "answers": ["x"], "plan": 3}]
    path = _write(tmp_path / "questions.jsonl", [json.dumps(r) for r in rows])
    report = LoadReport()
    assert [s.id for s in load_questions_jsonl(path, skip_bad=True, report=report)] == ["a"]
    assert [e.line for e in report.skipped] == [2, 3, 4]


def test_prepare_skip_bad_skips_every_bad_row_with_its_line(tmp_path: Path, capsys):
    rows = [json.dumps(_hp_row(1)), DEEP, "garbage", json.dumps(_hp_row(4, question="Why? " * 2000)),
            json.dumps(_hp_row(5, answer=7 * [None])), json.dumps(_hp_row(6))]
    src = _write(tmp_path / "hp.jsonl", rows)
    assert cli_main(["prepare", "hotpotqa", "--input", str(src), "--out", str(tmp_path / "out"), "--skip-bad"]) == 0
    out = capsys.readouterr().out
    assert "skipped 4 bad rows" in out
    for line in (2, 3, 4, 5):
        assert f"hp.jsonl:{line}:" in out, out
    assert [q.id for q in load_questions_jsonl(tmp_path / "out" / "questions.jsonl")] == ["q1", "q6"]
