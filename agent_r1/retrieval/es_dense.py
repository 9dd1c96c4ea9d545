"""Dense and hybrid retrieval in Elasticsearch: a `dense_vector` field searched with kNN.

- Mapping: the BM25 fields of es_backend plus `vector`, a `dense_vector` (indexed, HNSW in the
  server, `dot_product` similarity: our vectors are unit length, where it equals cosine and is
  the fastest). The encoder's name and settings are written into the mapping's `_meta`, so a
  reopened index encodes queries with the model that encoded its passages, whoever opens it.
- `elasticsearch-dense`: the `knn` section of `_search` (top-level kNN, ES >= 8.0).
- `elasticsearch-hybrid`: BM25 (`multi_match` `most_fields`, as es_backend) + kNN fused by RRF.
  `rrf="server"` sends one `retriever.rrf` search (ES >= 8.14; a licensed feature on Elastic's own
  builds), `rrf="client"` sends the two rankings and fuses them here with the same formula
  (hybrid_backend.rrf_fuse), `rrf="auto"` (default) tries the server once and falls back to the
  client for good when the server refuses the request (old version, no licence).
- Query text is only ever encoded or given to `multi_match` as plain text: no query syntax.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from agent_r1.data.schema import Document
from agent_r1.retrieval.base import INDEX_FIX, Hit, SearchConfig, register_retriever
from agent_r1.retrieval.embeddings import embed_documents
from agent_r1.retrieval.encoders import Encoder, encoder_from_settings, get_encoder
from agent_r1.retrieval.es_backend import MAPPING, ElasticsearchRetriever, multi_match
from agent_r1.retrieval.hybrid_backend import DEPTH_FACTOR, RANK_CONSTANT, rrf_fuse

VECTOR_FIELD = "vector"
SOURCE = ["id", "title", "text"]  # never return the vector: it is large and unused


def dense_mapping(encoder: Encoder) -> dict[str, Any]:
    mapping = copy.deepcopy(MAPPING)
    mapping["_meta"].update(encoder=encoder.name, encoder_settings=encoder.settings())
    mapping["properties"][VECTOR_FIELD] = {"type": "dense_vector", "dims": encoder.dim, "index": True,
                                           "similarity": "dot_product"}
    return mapping


def num_candidates(k: int) -> int:
    # per-shard HNSW breadth: ES requires k <= num_candidates <= 10000; 10x k is its documented rule of thumb
    return min(10_000, max(100, 10 * k))


def knn_body(vector: Sequence[float], k: int) -> dict[str, Any]:
    """A top-level kNN search (ES `_search` `knn` section)."""
    return {"knn": {"field": VECTOR_FIELD, "query_vector": [float(x) for x in vector], "k": k,
                    "num_candidates": num_candidates(k)},
            "size": k, "_source": SOURCE}


def rrf_body(query: str, vector: Sequence[float], k: int, depth: int) -> dict[str, Any]:
    """BM25 + kNN fused by the server's `rrf` retriever (ES >= 8.14)."""
    lexical = multi_match(query, depth)["query"]
    return {
        "retriever": {"rrf": {
            "retrievers": [
                {"standard": {"query": lexical}},
                {"knn": {"field": VECTOR_FIELD, "query_vector": [float(x) for x in vector], "k": depth,
                         "num_candidates": num_candidates(depth)}},
            ],
            "rank_constant": RANK_CONSTANT, "rank_window_size": depth,
        }},
        "size": k, "_source": SOURCE,
    }


def server_refused_rrf(error: Any) -> bool:
    """Whether an msearch item error means "this server cannot do retriever.rrf" (unknown key on
    ES < 8.14, or a licence refusal) rather than a real failure of the query."""
    text = str(error).lower()
    return ("retriever" in text or "rrf" in text or "reciprocal rank fusion" in text) and \
        any(w in text for w in ("unknown", "license", "licence", "not supported", "unsupported", "unrecognized"))


class _DenseES(ElasticsearchRetriever):
    """Shared by the dense and hybrid Elasticsearch backends: vectors in, kNN/RRF bodies out."""

    def __init__(self, config: SearchConfig, encoder: Encoder | None = None) -> None:
        super().__init__(config)
        # how this retriever fuses now: "auto" becomes "client" for good once the server refuses
        self.rrf = config.rrf
        self._encoder = encoder
        self._vectors: dict[str, np.ndarray] = {}
        self._encoder_checked = False  # the query encoder has been matched against the index's _meta

    # ------------------------------------------------------------------ building
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = get_encoder(self.config.encoder, batch_size=self.config.encode_batch_size)
        return self._encoder

    def index_mapping(self) -> dict[str, Any]:
        """The BM25 mapping plus the vector field, with the encoder in `_meta` (create_index uses it)."""
        return dense_mapping(self.encoder())

    def index(self, docs: Iterable[Document]) -> int:
        docs = list(docs)
        embedded = embed_documents(docs, self.encoder(), self.config.embed_cache_dir or None)  # "": the default
        self._vectors = dict(zip(embedded.ids, embedded.vectors))
        try:
            return super().index(docs)
        finally:
            self._vectors = {}

    def _actions(self, docs: Iterable[Document]) -> Iterator[dict[str, Any]]:
        for action in super()._actions(docs):
            action["_source"][VECTOR_FIELD] = self._vectors[action["_id"]].tolist()
            yield action

    # ------------------------------------------------------------------ searching
    def query_encoder(self) -> Encoder:
        """The encoder named in the index's own mapping (the one that encoded its passages)."""
        if self._encoder is None or not self._encoder_checked:
            meta = self.mapping().get("_meta", {})
            if "encoder" not in meta:
                raise ValueError(f"Elasticsearch index {self.index_name!r} at {self.url} has no encoder in its "
                                 f"mapping's _meta (not a dense index); {INDEX_FIX} --backend {self.backend_name}")
            if self._encoder is None or self._encoder.name != meta["encoder"]:
                self._encoder = encoder_from_settings(meta["encoder"], meta.get("encoder_settings", {}))
            self._encoder_checked = True
        return self._encoder

    def _query_vectors(self, queries: list[str]) -> np.ndarray:
        return self.query_encoder().encode_queries(queries)


@register_retriever("elasticsearch-dense")
class ElasticsearchDenseRetriever(_DenseES):
    """kNN over the `vector` field (see the module docstring)."""

    backend_name = "elasticsearch-dense"

    def _search_batch(self, queries: list[str], vectors: np.ndarray, k: int) -> list[list[Hit]]:
        items = self._send([knn_body(v, k) for v in vectors])
        return [self._hits(item, f"the kNN query for {q[:80]!r}") for q, item in zip(queries, items)]


@register_retriever("elasticsearch-hybrid")
class ElasticsearchHybridRetriever(_DenseES):
    """BM25 + kNN fused by RRF, in the server when it can, here otherwise (see the module docstring)."""

    backend_name = "elasticsearch-hybrid"

    def _search_batch(self, queries: list[str], vectors: np.ndarray, k: int) -> list[list[Hit]]:
        depth = DEPTH_FACTOR * k
        if self.rrf in ("auto", "server"):
            items = self._send([rrf_body(q, v, k, depth) for q, v in zip(queries, vectors)])
            refused = [item for item in items if "error" in item and server_refused_rrf(item["error"])]
            if not refused:
                return [self._hits(item, f"the hybrid query for {q[:80]!r}") for q, item in zip(queries, items)]
            if self.rrf == "server":
                raise RuntimeError(f"Elasticsearch at {self.url} cannot run retriever.rrf ({str(refused[0]['error'])[:300]}); "
                                   "use rrf='client' (fusion in agent-r1) or a server >= 8.14 with RRF licensed")
            self.rrf = "client"  # the server said no: fuse here from now on
        bodies = []
        for q, v in zip(queries, vectors):
            bodies += [multi_match(q, depth) | {"_source": SOURCE}, knn_body(v, depth)]
        items = self._send(bodies)
        out = []
        for j, q in enumerate(queries):
            lexical = self._hits(items[2 * j], f"the BM25 query for {q[:80]!r}")
            semantic = self._hits(items[2 * j + 1], f"the kNN query for {q[:80]!r}")
            out.append(rrf_fuse([lexical, semantic], k))
        return out
