"""Retrieval benchmark on the 400 HotpotQA sample questions (samples/): BM25 (tantivy, Elasticsearch via
noida-db), dense (MiniLM-L6 + faiss flat / HNSW) and hybrid (BM25 + dense, RRF k=60).

Measures, per backend: index build time over the 3,952-paragraph union corpus, batch search of
all 400 questions at k=5 (median over repeats, queries/s; dense and hybrid include encoding the
queries), recall@5 of supporting titles (any/all); and the top-1 agreement between tantivy and
Elasticsearch. Writes benchmarks/results/retrieval.json; sections not run this time (e.g. with
--skip-es) are kept from the previous file.

    .venv/bin/python -m benchmarks.retrieval [--repeats 5] [--es-repeats 1] [--skip-es]

The dense index build time includes encoding the corpus into a fresh embedding cache (a temp
folder), so it is the cold cost; hybrid and HNSW then reuse those cached vectors.

noida-db is started on a free 127.0.0.1 port in a temp dir and stopped at the end. It is an
Elasticsearch-API stand-in, not Elasticsearch: its timings say nothing about a real cluster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agent_r1.data.corpus import build_corpus_from_hotpotqa, dedup_documents, make_document
from agent_r1.data.io import iter_records
from agent_r1.data.loaders import load_hotpotqa
from agent_r1.retrieval.base import SearchConfig, open_retriever
from agent_r1.retrieval.metrics import recall_at_k, top1_agreement
from benchmarks.common import ROOT, machine, result_path, write_json
from tests.support.noida import start_noida

HOTPOTQA = ROOT / "samples" / "hotpotqa" / "hotpotqa_dev_distractor_400.jsonl"  # tracked in the repo
K = 5


def bench_backend(config: SearchConfig | Any, docs, queries, gold, repeats: int) -> tuple[dict[str, Any], list]:
    """`config` is a SearchConfig (opened through the registry) or an already built retriever."""
    retriever = open_retriever(config) if isinstance(config, SearchConfig) else config
    start = time.perf_counter()
    n = retriever.index(docs)
    build_s = time.perf_counter() - start
    retriever.search(queries[:5], K)  # warm caches / connections
    times, results = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results = retriever.search(queries, K)
        times.append(time.perf_counter() - start)
    retriever.close()
    median = statistics.median(times)
    recall = recall_at_k(results, gold, K)
    return {
        "documents": n, "index_build_s": round(build_s, 4), "repeats": repeats,
        "search_all_s_median": round(median, 4), "search_all_s_runs": [round(t, 4) for t in times],
        "queries_per_s": round(len(queries) / median, 1), "ms_per_query": round(1000 * median / len(queries), 3),
        f"recall@{K}_any": recall.any, f"recall@{K}_all": recall.all, "n_questions": recall.n,
    }, results


def bench_dense(tmp: Path, docs, queries, gold, repeats: int, bm25: dict[str, Any]) -> dict[str, Any]:
    """Dense (flat, HNSW) and hybrid rows, plus hybrid's gain over BM25 on recall@5 "all"."""
    from agent_r1.retrieval.dense_backend import DenseRetriever
    from agent_r1.retrieval.encoders import get_encoder
    from agent_r1.retrieval.hybrid_backend import HybridRetriever

    encoder = get_encoder("minilm")
    out: dict[str, Any] = {"encoder": {"name": encoder.name, "settings": encoder.settings(), "dim": encoder.dim,
                                       "torch_threads": torch_threads()}}
    cache = str(tmp / "embeddings")  # fresh: the first dense build pays the corpus encoding
    rows = {
        "dense": lambda: DenseRetriever(SearchConfig(backend="dense", index_dir=str(tmp / "dense"),
                                                     embed_cache_dir=cache), encoder),
        "dense_hnsw": lambda: DenseRetriever(SearchConfig(backend="dense", index_dir=str(tmp / "hnsw"),
                                                          embed_cache_dir=cache, dense_index="hnsw"), encoder),
        "hybrid": lambda: HybridRetriever(SearchConfig(backend="hybrid", index_dir=str(tmp / "hybrid"),
                                                       embed_cache_dir=cache), encoder),
    }
    for name, make in rows.items():
        row, _ = bench_backend(make(), docs, queries, gold, repeats)
        row["index_build_includes_corpus_encoding"] = name == "dense"
        out[name] = row
        print(name, json.dumps(row))
    out["hybrid_minus_bm25_recall_all"] = round(out["hybrid"][f"recall@{K}_all"] - bm25[f"recall@{K}_all"], 4)
    out["hybrid_minus_bm25_recall_any"] = round(out["hybrid"][f"recall@{K}_any"] - bm25[f"recall@{K}_any"], 4)
    return out


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def hotpot(n: int | None = None) -> tuple[list, list]:
    """(documents, questions) of HotpotQA-400, or of its first `n` questions (their paragraphs only)."""
    samples = load_hotpotqa(HOTPOTQA)
    if n is None:
        return build_corpus_from_hotpotqa(HOTPOTQA), samples
    rows = [rec.value for rec in iter_records(HOTPOTQA)][:n]
    docs = dedup_documents(make_document(title, " ".join(x.strip() for x in sents))
                           for row in rows for title, sents in row["context"])
    return docs, samples[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="tantivy search repeats (median)")
    ap.add_argument("--es-repeats", type=int, default=1, help="Elasticsearch search repeats (slow)")
    ap.add_argument("--skip-es", action="store_true")
    ap.add_argument("--dense-repeats", type=int, default=3, help="dense/hybrid search repeats (median)")
    ap.add_argument("--questions", type=int, default=None, help="the first N HotpotQA questions (default: all 400)")
    args = ap.parse_args(argv)

    docs, samples = hotpot(args.questions)
    queries = [s.question for s in samples]
    gold = [s.supporting_titles for s in samples]
    report: dict[str, Any] = {
        "dataset": "hotpotqa_dev_distractor_400 (samples/)", "k": K,
        "n_questions": len(queries), "n_documents": len(docs),
        "machine": machine(tantivy=version("tantivy"), elasticsearch_client=version("elasticsearch"),
                           noida_db=version("noida-db") if not args.skip_es else None, faiss=version("faiss-cpu"),
                           note="2 cores shared with other jobs while measured: speeds are lower bounds"),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        tv, tv_results = bench_backend(SearchConfig(backend="tantivy", index_dir=str(Path(tmp) / "tv")),
                                       docs, queries, gold, args.repeats)
        report["tantivy"] = tv
        print("tantivy", json.dumps(tv))
        report.update(bench_dense(Path(tmp), docs, queries, gold, args.dense_repeats, tv))
        if not args.skip_es:
            server = start_noida(Path(tmp) / "noida")
            try:
                config = SearchConfig(backend="elasticsearch", index_dir="", url=server.url, index_name="bench-hotpot",
                                      timeout_s=600)
                es, es_results = bench_backend(config, docs, queries, gold, args.es_repeats)
                es["server"] = "noida-db (Elasticsearch REST API stand-in, reports 8.15.3)"
            finally:
                server.stop()
            report["elasticsearch"] = es
            agreement = top1_agreement(tv_results, es_results)
            report["top1_agreement"] = agreement.to_dict()
            print("elasticsearch", json.dumps(es))
            print("agreement", json.dumps(agreement.to_dict()))
    out = result_path("retrieval")
    if out.exists():  # keep what this run did not measure (the slow Elasticsearch section, --skip-es)
        previous = json.loads(out.read_text(encoding="utf-8"))
        kept = {key: value for key, value in previous.items() if key not in report}
        if kept:
            report = {**kept, **report, "kept_from_previous_run": sorted(kept)}
    write_json(out, report, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
