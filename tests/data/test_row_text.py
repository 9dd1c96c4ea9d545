"""A lone surrogate (`"\\udcff"`, which Python's JSON reader accepts) in any text of a data row or a
corpus document is refused at load, naming the file, the line and the field. Loaded, it would crash the
tokenizer (TypeError) at the first rollout that drew the row, and again on every resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.data.io import RowError

BAD = "\\udcff"  # as written in the file: a JSON escape for a lone surrogate


def _rows(tmp_path: Path, bad_row: str) -> Path:
    good = json.dumps({"id": "q1", "question": "Where is Karivo?", "answers": ["Lumeno"]})
    path = tmp_path / "questions.jsonl"
    path.write_text(good + "\n" + bad_row + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("field, row", [
    ("question", '{"id": "q2", "question": "Who %s?", "answers": ["a"]}' % BAD),
    ("answers", '{"id": "q2", "question": "Who?", "answers": ["a%s"]}' % BAD),
    ("supporting_titles", '{"id": "q2", "question": "Who?", "answers": ["a"], "supporting_titles": ["T%s"]}' % BAD),
    ("env", '{"id": "q2", "question": "Who?", "answers": ["a"], "env": {"system_prompt": "x%s"}}' % BAD),
    ("id", '{"id": "q%s", "question": "Who?", "answers": ["a"]}' % BAD),
])
def test_a_lone_surrogate_in_a_row_is_refused_naming_file_line_and_field(tmp_path, field, row):
    from agent_r1.data.loaders import LoadReport, load_questions_jsonl

    path = _rows(tmp_path, row)
    with pytest.raises(RowError) as info:
        load_questions_jsonl(path)
    assert info.value.line == 2 and "surrogate" in str(info.value) and field in str(info.value), str(info.value)
    report = LoadReport()
    samples = load_questions_jsonl(path, skip_bad=True, report=report)
    assert [s.id for s in samples] == ["q1"] and report.n_skipped == 1


def test_official_formats_and_the_corpus_refuse_it_too(tmp_path):
    from agent_r1.data.corpus import iter_corpus_jsonl
    from agent_r1.data.loaders import load_hotpotqa

    array = tmp_path / "hotpot.json"
    array.write_text('[{"_id": "a", "question": "Q?", "answer": "x%s", "supporting_facts": [], "context": []}]' % BAD)
    with pytest.raises(RowError, match="surrogate"):
        load_hotpotqa(array)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "d1", "title": "T", "text": "ok"}\n{"id": "d2", "title": "T2", "text": "a%s"}\n' % BAD)
    with pytest.raises(RowError) as info:
        list(iter_corpus_jsonl(corpus))
    assert info.value.line == 2


def test_the_tokenizer_is_what_crashed():
    """Why the load must refuse it: the chat codec cannot encode such text (it crashed the encoder)."""
    from agent_r1.models.tokenizer import train_tokenizer
    from agent_r1.rollout.chat import ChatCodec

    codec = ChatCodec(train_tokenizer(["a b c"] * 5, vocab_size=60))
    with pytest.raises((TypeError, UnicodeError)):
        codec.encode_data(json.loads('"%s"' % BAD))
