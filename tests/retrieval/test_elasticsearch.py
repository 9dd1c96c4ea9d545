"""The Elasticsearch backend against a real server speaking its REST API (noida-db).

noida-db is slow (~0.05 s a query at 300 documents), so the corpus here is the paragraphs
of the first 30 HotpotQA questions (300 documents).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from agent_r1.cli import main as cli_main
from agent_r1.data.corpus import dedup_documents, make_document
from agent_r1.data.io import iter_records, write_jsonl
from agent_r1.data.loaders import load_hotpotqa
from agent_r1.retrieval.base import SearchConfig, open_index, open_retriever
from agent_r1.retrieval.search import COMMAND_TIMEOUT_S
from agent_r1.retrieval.metrics import recall_at_k, top1_agreement
from tests.es_fixture import HOTPOTQA_400, es_server, fresh_es_server, require_sample  # noqa: F401
from tests.retrieval.test_tantivy import INJECTION

N_QUESTIONS = 30


@pytest.fixture(scope="module")
def small_hotpot():
    path = require_sample(HOTPOTQA_400)
    rows = [rec.value for rec in iter_records(path)][:N_QUESTIONS]
    docs = dedup_documents(make_document(title, " ".join(s.strip() for s in sents))
                           for row in rows for title, sents in row["context"])
    return docs, load_hotpotqa(path)[:N_QUESTIONS]


@pytest.fixture(scope="module")
def es(es_server, small_hotpot):
    docs, _ = small_hotpot
    config = SearchConfig(backend="elasticsearch", index_dir="", url=es_server.url, index_name="hotpot-small",
                          msearch_batch_size=7, bulk_chunk_size=64, retry_backoff_s=0.05, timeout_s=COMMAND_TIMEOUT_S)
    retriever = open_retriever(config)
    assert retriever.index(docs) == len(docs) == 300
    yield retriever
    retriever.close()


def test_mapping_applied(es):
    props = es.mapping()["properties"]
    assert props["text"] == {"type": "text", "analyzer": "english"}
    assert props["title"]["analyzer"] == "english"
    assert props["title"]["fields"]["keyword"]["type"] == "keyword"
    assert props["id"]["type"] == "keyword"


def test_bulk_indexed_and_refreshed(es, small_hotpot):
    docs, _ = small_hotpot
    assert es.count() == len(docs)
    hit = es.search([docs[0].text], 1)[0][0]
    assert (hit.id, hit.title, hit.text) == (docs[0].id, docs[0].title, docs[0].text)


def test_batched_msearch_agrees_with_tantivy(es, small_hotpot):
    docs, questions = small_hotpot
    queries = [q.question for q in questions]
    es_results = es.search(queries, 5)  # 30 queries in msearch batches of 7
    assert len(es_results) == N_QUESTIONS and all(len(r) == 5 for r in es_results)
    with tempfile.TemporaryDirectory() as tmp:
        tv = open_retriever(SearchConfig(backend="tantivy", index_dir=tmp))
        tv.index(docs)
        tv_results = tv.search(queries, 5)
        tv.close()
    agreement = top1_agreement(es_results, tv_results)
    assert agreement.n == N_QUESTIONS and agreement.top1 >= 0.9, agreement
    gold = [q.supporting_titles for q in questions]
    assert recall_at_k(es_results, gold, 5).any >= 0.9


def test_injection_like_queries_do_not_raise(es):
    results = es.search(INJECTION + ["", "  "], 3)
    assert len(results) == len(INJECTION) + 2 and results[-2:] == [[], []]


def test_cli_index_and_open_index(es_server, small_hotpot, tmp_path: Path, capsys):
    docs, _ = small_hotpot
    write_jsonl(tmp_path / "corpus.jsonl", docs[:40])
    out = tmp_path / "es_idx"
    assert cli_main(["index", "--corpus", str(tmp_path / "corpus.jsonl"), "--backend", "elasticsearch",
                     "--out", str(out), "--url", es_server.url, "--index-name", "cli-idx"]) == 0
    manifest = json.loads((out / "retriever.json").read_text())
    assert manifest["backend"] == "elasticsearch" and manifest["url"] == es_server.url
    assert manifest["index_name"] == "cli-idx" and manifest["num_docs"] == 40
    retriever = open_index(out)
    assert retriever.count() == 40
    retriever.close()
    capsys.readouterr()
    assert cli_main(["search", "--index", str(out), docs[3].title, "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == docs[3].id


def test_missing_index_is_clear(es_server):
    r = open_retriever(SearchConfig(backend="elasticsearch", index_dir="", url=es_server.url, index_name="no-such-index",
                                    timeout_s=COMMAND_TIMEOUT_S))
    with pytest.raises(FileNotFoundError, match=r"no-such-index.*agent-r1 index"):
        r.count()
    r.close()


def test_retries_then_clear_error_when_server_stops(fresh_es_server, monkeypatch):
    monkeypatch.setenv("AGENT_R1_ES_API_KEY", "s3cret-key-value")
    config = SearchConfig(backend="elasticsearch", index_dir="", url=fresh_es_server.url, index_name="stop-me",
                          retry_attempts=3, retry_backoff_s=0.1, timeout_s=5)
    retriever = open_retriever(config)
    retriever.index([make_document("A", "alpha paragraph"), make_document("B", "beta paragraph")])
    assert retriever.search(["alpha"], 1)[0][0].title == "A"
    fresh_es_server.stop()  # mid-test
    start = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        retriever.search(["alpha"], 1)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert fresh_es_server.url in message and "after 3 attempt(s)" in message
    assert "server is running" in message
    assert "s3cret-key-value" not in message
    assert elapsed >= 0.1 + 0.2  # two backoffs: 0.1 s then 0.2 s
    retriever.close()
