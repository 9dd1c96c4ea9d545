"""Where a tantivy search's time goes at one corpus size (part of benchmarks/retrieval_scale.py).

For each query form, per query: analysing the text and building the term queries (Python), tantivy's
search (scoring the posting lists, Rust), and fetching the k stored hits (decompressing doc-store
blocks). Then the cost of each distinct question word searched alone, with its document frequency,
and the question form with Elasticsearch's English stop words left out (what an `english`-analyzer
query would search; not the backend's ranking, so recall is reported with it), and whether a second
thread adds throughput (it does not when the binding holds the GIL while searching).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import tantivy

from agent_r1.retrieval.base import open_index

# Lucene's English stop set (Elasticsearch's `_english_`), which the `english` analyzer removes.
ES_ENGLISH_STOP = frozenset("a an and are as at be but by for if in into is it no not of on or such that the their "
                            "then there these they this to was will with".split())


def _us(seconds: float, n: int) -> float:
    return round(1e6 * seconds / max(n, 1), 1)


def split_times(retriever: Any, queries: list[str], k: int) -> dict[str, float]:
    """Microseconds per query for build / search / fetch, each phase timed over all queries."""
    searcher = retriever._open()
    t0 = time.perf_counter()
    built = [retriever._query(q) for q in queries]
    t1 = time.perf_counter()
    found = [searcher.search(q, limit=k, count=False).hits if q is not None else [] for q in built]
    t2 = time.perf_counter()
    for hits in found:
        for _score, address in hits:
            searcher.doc(address)["text"]
    t3 = time.perf_counter()
    n = len(queries)
    return {"analyze_and_build_us": _us(t1 - t0, n), "tantivy_search_us": _us(t2 - t1, n),
            "fetch_hits_us": _us(t3 - t2, n), "total_us": _us(t3 - t0, n)}


def word_costs(retriever: Any, words: list[str], k: int, repeats: int = 20) -> dict[str, dict[str, float]]:
    """Document frequency in `text` and search time of each analysed word searched alone (top-k)."""
    searcher = retriever._open()
    out = {}
    for word in words:
        query = retriever._query(word)
        if query is None:
            continue
        t0 = time.perf_counter()
        for _ in range(repeats):
            searcher.search(query, limit=k, count=False)
        term = retriever.tokens(word)[0]
        out[word] = {"doc_freq_text": searcher.doc_freq("text", term),
                     "search_us": _us(time.perf_counter() - t0, repeats)}
    return out


def threads_gain(retriever: Any, queries: list[str], k: int) -> dict[str, float]:
    """Wall time of the same searches in 1 thread and split over 2 threads (same process, same searcher)."""
    searcher = retriever._open()
    built = [q for q in (retriever._query(q) for q in queries) if q is not None]

    def run(part: list[tantivy.Query]) -> None:
        for q in part:
            searcher.search(q, limit=k, count=False)

    walls = {}
    for n in (1, 2):
        threads = [threading.Thread(target=run, args=(built[i::n],)) for i in range(n)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        walls[n] = time.perf_counter() - t0
    return {"one_thread_s": round(walls[1], 3), "two_threads_s": round(walls[2], 3),
            "speedup": round(walls[1] / walls[2], 2)}


def profile(index_dir: Path, forms: dict[str, tuple[list[str], list[str]]], k: int, n: int = 500) -> dict[str, Any]:
    """`forms`: name -> (queries, gold titles). Uses the first `n` queries of each form."""
    retriever = open_index(index_dir)
    out: dict[str, Any] = {"queries_per_form": n}
    for form, (queries, _gold) in forms.items():
        retriever.search(queries[:n], k)  # warm, so every phase below sees the same cache state
        out[form] = split_times(retriever, queries[:n], k)
    if "question" in forms:
        questions, gold = (x[:n] for x in forms["question"])
        words = sorted({w.strip("?").lower() for q in questions[:1] for w in q.split()})
        out["question_words_alone"] = word_costs(retriever, words, k)
        stopped = [" ".join(w for w in q.split() if w.lower() not in ES_ENGLISH_STOP) for q in questions]
        hits = retriever.search(stopped, k)
        out["question_without_es_english_stop_words"] = {
            **split_times(retriever, stopped, k), "example": stopped[0],
            f"recall@{k}": round(sum(g in [h.title for h in hs] for g, hs in zip(gold, hits)) / len(gold), 4),
            "note": "not the backend's query (it searches every word); what dropping ES's stop words would cost"}
        out["threads_question_queries"] = threads_gain(retriever, questions[:200], k)
    retriever.close()
    return out
