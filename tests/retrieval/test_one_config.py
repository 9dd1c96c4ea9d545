"""One retrieval config: the `search:` section of a params file is what the backends are built
from, unchanged, and index folders written before it still open.

There were two classes, SearchConfig (the user's) and RetrievalConfig (the backends'), with the same
settings under two names and defaults (timeout_s / request_timeout_s, es_pool_size / pool_size) and a
translation between them. These tests hold the one config to its promises: every user key keeps its
value on the way to the backend, params.yaml parses to the values it always did, and a retriever.json in
today's format (written by the code before the change) opens as it did.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from agent_r1.config import load_config
from agent_r1.data.corpus import make_document
from agent_r1.retrieval.base import (
    MANIFEST_FIELDS,
    SearchConfig,
    build_index,
    manifest_of,
    open_index,
    read_manifest,
    write_manifest,
)
from agent_r1.retrieval.search import COMMAND_TIMEOUT_S, DEFAULT_ES_URL
from agent_r1.retrieval.tantivy_backend import TantivyRetriever

REPO_ROOT = Path(__file__).resolve().parents[2]

PARAMS = """\
search:
  backend: elasticsearch
  index_dir: {index_dir}
  url: http://127.0.0.1:9
  index_name: one-config
  k: 4
  max_chars_per_doc: 250
  timeout_s: 2.5
  es_pool_size: 3
  retry_attempts: 2
  retry_backoff_s: 0.25
  bulk_chunk_size: 11
  msearch_batch_size: 7
  encode_batch_size: 16
"""

# What the code before the one config wrote to retriever.json for each backend with default settings
# (RetrievalConfig.to_manifest, fed by search.index_options): an index folder records exactly these.
OLD_MANIFESTS = {
    "tantivy": {"backend": "tantivy"},
    "elasticsearch": {"backend": "elasticsearch", "url": "http://127.0.0.1:9200", "index_name": "agent-r1-corpus"},
    "dense": {"backend": "dense", "encoder": "minilm", "dense_index": "flat", "hnsw_ef_search": 128, "rrf": "auto"},
    "hybrid": {"backend": "hybrid", "encoder": "minilm", "dense_index": "flat", "hnsw_ef_search": 128, "rrf": "auto"},
    "elasticsearch-dense": {"backend": "elasticsearch-dense", "url": "http://127.0.0.1:9200",
                            "index_name": "agent-r1-corpus", "encoder": "minilm", "dense_index": "flat",
                            "hnsw_ef_search": 128, "rrf": "auto"},
    "elasticsearch-hybrid": {"backend": "elasticsearch-hybrid", "url": "http://127.0.0.1:9200",
                             "index_name": "agent-r1-corpus", "encoder": "minilm", "dense_index": "flat",
                             "hnsw_ef_search": 128, "rrf": "auto"},
}


def test_params_yaml_parses_to_the_values_it_always_did():
    """The keys a params file had before keep their names, meanings and defaults."""
    search = load_config(REPO_ROOT / "params.yaml").search
    assert {f.name: getattr(search, f.name) for f in fields(SearchConfig)
            if f.name in ("backend", "index_dir", "url", "index_name", "k", "max_chars_per_doc", "timeout_s",
                          "es_pool_size", "encoder", "dense_index", "embed_cache_dir")} == {
        "backend": "tantivy", "index_dir": "data/index", "url": "", "index_name": "agent-r1-corpus", "k": 3,
        "max_chars_per_doc": 300, "timeout_s": 10.0, "es_pool_size": 10, "encoder": "minilm",
        "dense_index": "flat", "embed_cache_dir": "data/embeddings"}
    # the backend tuning keys join with the defaults the backends had
    assert (search.retry_attempts, search.retry_backoff_s, search.bulk_chunk_size, search.msearch_batch_size,
            search.overwrite, search.hnsw_m, search.hnsw_ef_construction, search.hnsw_ef_search,
            search.encode_batch_size, search.rrf, search.credentials_url) == (
        5, 0.5, 500, 100, False, 32, 200, 128, 64, "auto", None)


def test_a_params_files_search_section_reaches_the_backend_unchanged(tmp_path):
    from agent_r1.runs.assembly import open_run_index

    index_dir = tmp_path / "es-index"
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.format(index_dir=index_dir))
    cfg = load_config(params)
    write_manifest(SearchConfig(backend="elasticsearch", index_dir=str(index_dir), url="http://127.0.0.1:9",
                                index_name="one-config"))
    retriever = open_run_index(cfg, index_dir, check=False)  # no server: only the client is built
    try:
        got = retriever.config
        for f in fields(SearchConfig):
            if f.name not in (*MANIFEST_FIELDS, "index_dir", "credentials_url"):
                assert getattr(got, f.name) == getattr(cfg.search, f.name), f.name
        assert (got.url, got.index_name, got.trusted_url()) == ("http://127.0.0.1:9", "one-config", "http://127.0.0.1:9")
        # ... and into the Elasticsearch client: timeout_s is each request's timeout, es_pool_size the pool
        client = retriever.client
        assert client._request_timeout == 2.5
        assert [node.config.connections_per_node for node in client.transport.node_pool.all()] == [3]
    finally:
        retriever.close()


def test_an_index_build_takes_the_run_settings_and_waits_for_bulk_requests(tmp_path, monkeypatch):
    """A run builds its index from its `search` section as it is; only the request timeout is raised to
    COMMAND_TIMEOUT_S (bulk requests are not a search the tool runner waits on), as it always was."""
    from agent_r1.retrieval import base

    built = []

    class Recorder:
        def __init__(self, config):
            built.append(config)

        def index(self, docs):
            return len(list(docs))

        def close(self):
            pass

    monkeypatch.setattr(base, "open_retriever", Recorder)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps(make_document("A", "alpha").to_dict()) + "\n")
    cfg = load_config(None, {"search.backend": "elasticsearch", "search.es_pool_size": 3, "search.retry_attempts": 2,
                             "search.bulk_chunk_size": 11, "search.overwrite": True})
    assert build_index(corpus, tmp_path / "a", config=cfg.search) == 1
    cfg_slow = load_config(None, {"search.timeout_s": 120})
    build_index(corpus, tmp_path / "b", config=cfg_slow.search)
    first, second = built
    assert (first.es_pool_size, first.retry_attempts, first.bulk_chunk_size, first.overwrite) == (3, 2, 11, True)
    assert first.index_dir == str(tmp_path / "a") and first.timeout_s == COMMAND_TIMEOUT_S
    assert second.timeout_s == 120  # a longer timeout of the user's still applies
    assert cfg.search.timeout_s == 10.0  # the run's own (frozen) config is not changed
    manifest = json.loads((tmp_path / "a" / "retriever.json").read_text())
    assert manifest["url"] == DEFAULT_ES_URL and manifest["num_docs"] == 1


@pytest.mark.parametrize("backend", sorted(OLD_MANIFESTS))
def test_retriever_json_keeps_its_format(backend, tmp_path):
    config = SearchConfig(backend=backend, index_dir=str(tmp_path))
    assert manifest_of(config) == OLD_MANIFESTS[backend]
    path = write_manifest(config, {"num_docs": 2})
    assert path.read_text(encoding="utf-8") == json.dumps({**OLD_MANIFESTS[backend], "num_docs": 2}, indent=2) + "\n"


def _old_manifest(folder: Path, data: dict) -> None:
    """A retriever.json written by the code before the one config (its exact layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "retriever.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def test_an_old_tantivy_folder_still_opens(tmp_path):
    folder = tmp_path / "old-tantivy"
    retriever = TantivyRetriever(SearchConfig(index_dir=str(folder)))
    retriever.index([make_document("Karivo", "Karivo is a town"), make_document("Lumeno", "a river")])
    retriever.close()
    _old_manifest(folder, {"backend": "tantivy", "num_docs": 2, "corpus": "data/x/corpus.jsonl",
                           "corpus_sha1": "0" * 40})
    opened = open_index(folder)
    try:
        assert opened.count() == 2 and opened.search(["town"], 1)[0][0].title == "Karivo"
    finally:
        opened.close()


def test_old_manifests_read_to_what_they_recorded(tmp_path):
    """Every field an old retriever.json recorded is read back; nothing else comes from the file (a
    file naming an old field such as request_timeout_s or pool_size is not obeyed: it was never written)."""
    for backend, data in OLD_MANIFESTS.items():
        folder = tmp_path / backend
        extra = {"encoder_settings": {"max_length": 256}, "dim": 384, "embedding_key": "k"} \
            if "encoder" in data else {}
        _old_manifest(folder, {**data, **extra, "num_docs": 2, "request_timeout_s": 1, "pool_size": 99,
                               "overwrite": True, "embed_cache_dir": "/elsewhere"})
        config = read_manifest(folder)
        assert {k: getattr(config, k) for k in data} == data
        assert config.index_dir == str(folder) and config.timeout_s == COMMAND_TIMEOUT_S
        assert (config.es_pool_size, config.overwrite, config.embed_cache_dir) == (10, False, "")
        assert config.trusted_url() == ""  # a file is not the user: no credentials without the opener's word
    run = load_config(None, {"search.url": "http://127.0.0.1:9200/", "search.timeout_s": 3}).search
    opened = read_manifest(tmp_path / "elasticsearch", run)
    assert (opened.timeout_s, opened.trusted_url(), opened.url) == (3, "http://127.0.0.1:9200/", "http://127.0.0.1:9200")


@pytest.mark.parametrize("key, value, words", [
    ("search.retry_attempts", 0, "[1, 100]"), ("search.bulk_chunk_size", 10**9, "[1, 100000]"),
    ("search.hnsw_m", 1, "[2, 1024]"), ("search.encode_batch_size", 0, "[1, 65536]"),
    ("search.retry_backoff_s", -1, "[0, 3600]"), ("search.rrf", "bogus", "search.rrf"),
    ("search.credentials_url", "http://elastic:pw@127.0.0.1:9200", "holds credentials"),
])
def test_the_new_search_keys_are_validated_like_the_others(key, value, words):
    with pytest.raises(ValueError) as err:
        load_config(None, {key: value})
    assert key in str(err.value) and words in str(err.value), str(err.value)
