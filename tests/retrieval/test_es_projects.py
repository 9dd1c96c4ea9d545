"""Two projects on one Elasticsearch never replace each other's corpus. When both make their index with
agent-r1 and the default name, the overwrite guard's `_meta` marker alone would let the second through, and
the first project's searches would return the second corpus. So an index records which index folder made
it: another folder's rebuild is refused, and a project whose index was replaced anyway (--overwrite) is told
so when it opens it, instead of searching someone else's documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_r1.data.corpus import make_document
from agent_r1.data.io import write_jsonl
from agent_r1.retrieval.base import build_index, open_index
from tests.es_fixture import es_server  # noqa: F401


def _project(tmp_path: Path, name: str, title: str) -> tuple[Path, Path]:
    root = tmp_path / name
    corpus = root / "corpus.jsonl"
    write_jsonl(corpus, [make_document(title, f"{title} is a town"), make_document(f"{title} river", "a river")])
    return corpus, root / "es-index"


def _titles(index_dir: Path, query: str) -> list[str]:
    retriever = open_index(index_dir)
    try:
        return [h.title for h in retriever.search([query], 5)[0]]
    finally:
        retriever.close()


def test_a_second_project_cannot_replace_the_first_ones_index(es_server, tmp_path):  # noqa: F811
    options = {"url": es_server.url, "index_name": "agent-r1-corpus-shared"}
    corpus_a, dir_a = _project(tmp_path, "a", "Karivo")
    corpus_b, dir_b = _project(tmp_path, "b", "Lumeno")
    assert build_index(corpus_a, dir_a, "elasticsearch", **options) == 2
    assert build_index(corpus_a, dir_a, "elasticsearch", **options) == 2  # its own folder rebuilds it
    with pytest.raises(RuntimeError) as info:
        build_index(corpus_b, dir_b, "elasticsearch", **options)
    message = str(info.value)
    assert "agent-r1-corpus-shared" in message and str(dir_a.resolve()) in message and "--overwrite" in message
    assert _titles(dir_a, "town") == ["Karivo"]

    # replaced anyway, on purpose: the first project is told, never served the second corpus
    assert build_index(corpus_b, dir_b, "elasticsearch", overwrite=True, **options) == 2
    assert _titles(dir_b, "town") == ["Lumeno"]
    with pytest.raises(RuntimeError) as info:
        open_index(dir_a)
    assert str(dir_b.resolve()) in str(info.value) and "rebuild" in str(info.value)
