"""Hybrid retrieval: tantivy BM25 and dense (faiss) rankings fused by reciprocal rank fusion.

RRF (Cormack et al., 2009; Elasticsearch's `rrf` retriever) scores a document by
sum over rankings of 1 / (rank_constant + rank), rank counted from 1, over the top `depth` of
each ranking. It needs no score calibration between BM25 and cosine, which live on unrelated
scales. Both halves live in one index directory (`tantivy/` and `dense/`); the BM25 half keeps
tantivy's safe query building (query text analysed into terms, never parsed as syntax), the
dense half has no syntax at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent_r1.data.schema import Document
from agent_r1.retrieval.base import Hit, SearchConfig, check_search, register_retriever
from agent_r1.retrieval.dense_backend import DenseRetriever
from agent_r1.retrieval.encoders import Encoder
from agent_r1.retrieval.tantivy_backend import TantivyRetriever

RANK_CONSTANT = 60
DEPTH_FACTOR = 4  # each ranking contributes its top DEPTH_FACTOR * k


def rrf_fuse(rankings: Sequence[Sequence[Hit]], k: int, rank_constant: int = RANK_CONSTANT) -> list[Hit]:
    """The top `k` of the fused ranking; a hit's score is its RRF score. Ties keep the order in which
    documents first appear scanning rank 1 of every ranking, then rank 2, ... (stable, deterministic)."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    depth = max((len(r) for r in rankings), default=0)
    for rank in range(depth):
        for ranking in rankings:
            if rank < len(ranking):
                hit = ranking[rank]
                scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (rank_constant + rank + 1)
                first.setdefault(hit.id, hit)
    order = sorted(first, key=lambda doc_id: -scores[doc_id])  # sorted() is stable: ties keep first-seen order
    return [Hit(id=i, title=first[i].title, text=first[i].text, score=scores[i]) for i in order[:k]]


@register_retriever("hybrid")
class HybridRetriever:
    """BM25 (tantivy) + dense (faiss) fused by RRF; see the module docstring."""

    def __init__(self, config: SearchConfig, encoder: Encoder | None = None) -> None:
        self.config = config
        self.bm25 = TantivyRetriever(config)
        self.dense = DenseRetriever(config, encoder)

    def index(self, docs: Iterable[Document]) -> int:
        docs = list(docs)
        n_bm25 = self.bm25.index(docs)
        n_dense = self.dense.index(docs)
        if n_bm25 != n_dense:  # both read the same list: a mismatch is a bug, not a user error
            raise RuntimeError(f"hybrid index halves disagree: {n_bm25} BM25 documents, {n_dense} dense")
        return n_dense

    def manifest_extra(self) -> dict[str, Any]:
        return self.dense.manifest_extra()

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        check_search(queries, k)
        depth = DEPTH_FACTOR * k
        lexical = self.bm25.search(queries, depth)
        semantic = self.dense.search(queries, depth)
        return [rrf_fuse([a, b], k) for a, b in zip(lexical, semantic)]

    def count(self) -> int:
        n_bm25, n_dense = self.bm25.count(), self.dense.count()
        if n_bm25 != n_dense:
            raise ValueError(f"hybrid index in {self.config.index_dir} is inconsistent ({n_bm25} BM25 documents, "
                             f"{n_dense} dense); rebuild it with `agent-r1 index --backend hybrid`")
        return n_dense

    def close(self) -> None:
        self.bm25.close()
        self.dense.close()
