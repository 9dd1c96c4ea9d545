"""Corpus building from HotpotQA contexts and corpus JSONL loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.data.corpus import (
    build_corpus_from_hotpotqa,
    build_corpus_from_musique,
    doc_id,
    load_corpus_jsonl,
)
from agent_r1.data.io import write_jsonl
from tests.es_fixture import HOTPOTQA_400, require_sample


def test_hotpotqa_400_union():
    docs = build_corpus_from_hotpotqa(require_sample(HOTPOTQA_400))
    assert len(docs) == 3952
    assert len({d.id for d in docs}) == 3952
    first = docs[0]
    assert first.title == "Meet Corliss Archer"
    assert first.id == doc_id(first.title, first.text) and len(first.id) == 16
    assert first.text.startswith("Meet Corliss Archer, a program") and "  " not in first.text
    # stable across runs
    assert [d.id for d in build_corpus_from_hotpotqa(HOTPOTQA_400)] == [d.id for d in docs]


def test_dedup_and_stable_ids(tmp_path: Path):
    rows = [
        {"_id": "1", "context": [["A", ["x.", " y."]], ["B", ["z."]]]},
        {"_id": "2", "context": [["B", ["z."]], ["A", ["different."]]]},
    ]
    path = tmp_path / "hp.jsonl"
    write_jsonl(path, rows)
    docs = build_corpus_from_hotpotqa(path)
    assert [(d.title, d.text) for d in docs] == [("A", "x. y."), ("B", "z."), ("A", "different.")]
    assert docs[0].id == doc_id("A", "x. y.") != docs[2].id


def test_bad_context(tmp_path: Path):
    path = tmp_path / "hp.jsonl"
    write_jsonl(path, [{"_id": "1", "context": [["A", ["x"]]]}, {"_id": "2", "question": "no context"}])
    with pytest.raises(ValueError, match=r"hp\.jsonl:2: missing or non-list field 'context'"):
        build_corpus_from_hotpotqa(path)
    assert len(build_corpus_from_hotpotqa(path, skip_bad=True)) == 1


def test_musique_paragraphs(tmp_path: Path):
    path = tmp_path / "m.jsonl"
    para = {"title": "T", "paragraph_text": "text.", "is_supporting": True}
    write_jsonl(path, [{"id": "a", "paragraphs": [para]}, {"id": "b", "paragraphs": [para]}])
    docs = build_corpus_from_musique(path)
    assert [(d.title, d.text) for d in docs] == [("T", "text.")]


def test_load_corpus_jsonl(tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    write_jsonl(path, [{"id": "d1", "title": "A", "text": "a"}, {"title": "B", "text": "b"}, {"text": "c"}])
    docs = load_corpus_jsonl(path)
    assert [d.id for d in docs] == ["d1", doc_id("B", "b"), doc_id("", "c")]
    assert docs[2].title == ""


@pytest.mark.parametrize("rows,match", [
    ([{"id": "x", "title": "A", "text": "a"}, {"id": "x", "title": "B", "text": "b"}],
     r"corpus\.jsonl:2: duplicate id 'x' \(first on line 1\)"),
    ([{"title": "A"}], r"corpus\.jsonl:1: missing or empty field 'text'"),
    ([{"title": 3, "text": "a"}], r"corpus\.jsonl:1: field 'title' must be a string"),
])
def test_load_corpus_errors(tmp_path: Path, rows, match):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        load_corpus_jsonl(path)


def test_index_build_streams_and_a_bad_row_leaves_the_old_index(tmp_path: Path):
    from agent_r1.data.corpus import iter_corpus_jsonl
    from agent_r1.retrieval.base import build_index, open_index

    good = tmp_path / "good.jsonl"
    write_jsonl(good, [{"title": f"T{i}", "text": f"passage number {i} about Kavu"} for i in range(50)])
    docs = iter_corpus_jsonl(good)
    assert next(docs).title == "T0"  # a generator: one row parsed, not the file
    index = tmp_path / "index"
    assert build_index(good, index, "tantivy") == 50
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, [{"title": "A", "text": "new text"}] * 3)  # duplicate ids on line 2
    with pytest.raises(ValueError, match="duplicate id"):
        build_index(bad, index, "tantivy")
    r = open_index(index)
    try:
        assert r.search(["Kavu"], 3)[0][0].title.startswith("T")  # the old index answers
    finally:
        r.close()
