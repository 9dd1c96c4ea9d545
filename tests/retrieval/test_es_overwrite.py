"""`agent-r1 index --backend elasticsearch` never deletes an index it did not make: an existing index
is replaced only when its mapping carries agent-r1's `_meta` marker, or with `--overwrite`."""

from __future__ import annotations

from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from agent_r1.cli import main as cli_main
from agent_r1.data.corpus import make_document
from agent_r1.data.io import write_jsonl
from agent_r1.retrieval.es_backend import MAPPING
from agent_r1.retrieval.es_owner import made_by_agent_r1
from tests.es_fixture import es_server  # noqa: F401

# The `_meta` example of Elasticsearch's mapping documentation (mapping-meta-field): another
# application's metadata, which must not pass for ours.
DOCUMENTED_META = {"class": "MyApp::User", "version": {"minimum": "1.0", "maximum": "1.3"}}


@pytest.fixture
def client(es_server):  # noqa: F811
    c = Elasticsearch(es_server.url)
    yield c
    c.close()


def _index(tmp_path: Path, url: str, name: str, *extra: str) -> int:
    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(corpus, [make_document("Alpha", "alpha paragraph"), make_document("Beta", "beta paragraph")])
    return cli_main(["index", "--corpus", str(corpus), "--backend", "elasticsearch", "--out",
                     str(tmp_path / "idx"), "--url", url, "--index-name", name, *extra])


def _foreign(client: Elasticsearch, name: str, meta: dict | None = None) -> None:
    mappings = {"properties": {"body": {"type": "text"}}, **({"_meta": meta} if meta else {})}
    client.indices.create(index=name, mappings=mappings)
    client.index(index=name, id="1", document={"body": "precious"}, refresh=True)


@pytest.mark.parametrize("meta", [None, DOCUMENTED_META], ids=["no-meta", "other-apps-meta"])
def test_index_not_made_by_agent_r1_is_refused_and_kept(es_server, client, tmp_path, capsys, meta):  # noqa: F811
    name = f"their-index-{'meta' if meta else 'plain'}"
    _foreign(client, name, meta)
    assert _index(tmp_path, es_server.url, name) == 2
    err = capsys.readouterr().err
    assert repr(name) in err and "not made by agent-r1" in err and "--overwrite" in err, err
    assert client.count(index=name)["count"] == 1
    assert client.get(index=name, id="1")["_source"] == {"body": "precious"}
    assert not (tmp_path / "idx" / "retriever.json").exists()


def test_overwrite_flag_replaces_it_and_marks_it_ours(es_server, client, tmp_path):  # noqa: F811
    _foreign(client, "replace-me")
    assert _index(tmp_path, es_server.url, "replace-me", "--overwrite") == 0
    assert client.count(index="replace-me")["count"] == 2
    mappings = dict(client.indices.get_mapping(index="replace-me"))["replace-me"]["mappings"]
    assert made_by_agent_r1(mappings) and mappings["_meta"]["created_by"] == MAPPING["_meta"]["created_by"]
    assert mappings["_meta"]["owner"].endswith(str((tmp_path / "idx").resolve()))  # the folder that made it


def test_index_made_by_agent_r1_is_rebuilt_without_the_flag(es_server, client, tmp_path):  # noqa: F811
    assert _index(tmp_path, es_server.url, "ours") == 0
    assert _index(tmp_path, es_server.url, "ours") == 0  # a rebuild (e.g. the corpus changed)
    assert client.count(index="ours")["count"] == 2


def test_marker_check_on_documented_response_bodies():
    """GET /<index>/_mapping answers {index: {"mappings": {...}}}; we pass one index's `mappings`."""
    assert MAPPING["_meta"] == {"created_by": "agent-r1"}
    assert made_by_agent_r1({"_meta": {"created_by": "agent-r1"}, "properties": {}})
    assert not made_by_agent_r1({"_meta": DOCUMENTED_META, "properties": {"id": {"type": "keyword"}}})
    assert not made_by_agent_r1({"properties": {"id": {"type": "keyword"}}})
    assert not made_by_agent_r1({})
    assert not made_by_agent_r1({"_meta": "agent-r1"})
