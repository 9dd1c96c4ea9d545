"""Embedded dense retrieval with faiss: exact inner product (`flat`) or HNSW graph search (`hnsw`).

Layout: `index_dir/dense/` holds `index.faiss`, `docs.jsonl` (id, title, text in vector row order)
and `meta.json` (encoder name + settings, index type, dimension, corpus identity). The query
encoder is rebuilt from meta.json, never from the caller's config, so queries are always encoded
by the model that encoded the passages. Vectors are L2-normalised, so inner product = cosine.

There is no query syntax: the query text is only ever fed to the encoder's tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from agent_r1.data.io import built_aside
from agent_r1.data.schema import Document
from agent_r1.retrieval.base import INDEX_FIX, Hit, SearchConfig, check_search, register_retriever
from agent_r1.retrieval.embeddings import embed_documents
from agent_r1.retrieval.encoders import Encoder, encoder_from_settings, get_encoder

SUBDIR = "dense"
HNSW_FIELDS = ("hnsw_m", "hnsw_ef_construction", "hnsw_ef_search")  # recorded in meta.json of an hnsw index


def build_faiss_index(vectors: np.ndarray, config: SearchConfig) -> faiss.Index:
    """A faiss index of `vectors`: config.dense_index's type, with its hnsw_* settings."""
    dim = vectors.shape[1]
    if config.dense_index == "hnsw":
        index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.hnsw_ef_construction
        index.hnsw.efSearch = config.hnsw_ef_search
    else:
        index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


@register_retriever("dense")
class DenseRetriever:
    """Nearest passages by embedding similarity (see the module docstring)."""

    def __init__(self, config: SearchConfig, encoder: Encoder | None = None) -> None:
        if not config.index_dir:
            raise ValueError("the dense backend needs an index directory (SearchConfig.index_dir)")
        self.config = config
        self.root = Path(config.index_dir)
        self.path = self.root / SUBDIR
        self._encoder = encoder  # given (tests, shared with the hybrid backend) or built on first use
        self._index: faiss.Index | None = None
        self._docs: list[Document] = []
        self.meta: dict[str, Any] = {}

    # ------------------------------------------------------------------ building
    def encoder_for_build(self) -> Encoder:
        if self._encoder is None:
            self._encoder = get_encoder(self.config.encoder, batch_size=self.config.encode_batch_size)
        return self._encoder

    def index(self, docs: Iterable[Document]) -> int:
        """Embed `docs` (cached by corpus + encoder), build the faiss index aside, rename it in."""
        self.close()
        docs = list(docs)
        encoder = self.encoder_for_build()
        embedded = embed_documents(docs, encoder, self.config.embed_cache_dir or None)  # "": the default cache
        index = build_faiss_index(embedded.vectors, self.config)
        hnsw = {k: getattr(self.config, k) for k in HNSW_FIELDS} if self.config.dense_index == "hnsw" else None
        meta = {"encoder": encoder.name, "encoder_settings": encoder.settings(), "dim": encoder.dim,
                "dense_index": self.config.dense_index, "num_docs": len(docs), "corpus_sha1": embedded.corpus_sha1,
                "embedding_key": embedded.key, "hnsw": hnsw}
        # an index folder an older version built has its own meta.json (owned.py: legacy)
        with built_aside(self.path, "search.index_dir", ("index.faiss", "meta.json")) as tmp:
            faiss.write_index(index, str(tmp / "index.faiss"))
            with open(tmp / "docs.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(d.to_dict(), ensure_ascii=False) + "\n" for d in docs)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return len(docs)

    def manifest_extra(self) -> dict[str, Any]:
        """Fields for retriever.json: which encoder and index type this directory holds."""
        meta = self.meta or self._read_meta()
        return {k: meta[k] for k in ("encoder", "encoder_settings", "dense_index", "dim", "embedding_key") if k in meta}

    # ------------------------------------------------------------------ searching
    def _read_meta(self) -> dict[str, Any]:
        meta_path = self.path / "meta.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"no dense index in {self.root} (missing {meta_path}); {INDEX_FIX} --backend dense")
        try:
            return json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{meta_path} is corrupt ({err}); rebuild it: {INDEX_FIX}") from None

    def _open(self) -> faiss.Index:
        if self._index is None:
            meta = self._read_meta()
            try:
                index = faiss.read_index(str(self.path / "index.faiss"))
            except RuntimeError as err:
                raise ValueError(f"faiss index in {self.path} is corrupt ({str(err)[:200]}); rebuild it: {INDEX_FIX}") from None
            docs = [Document(**json.loads(line)) for line in (self.path / "docs.jsonl").read_text(encoding="utf-8").splitlines()]
            if index.ntotal != len(docs) or index.d != meta["dim"]:
                raise ValueError(f"dense index in {self.path} is inconsistent ({index.ntotal} vectors of dim {index.d}, "
                                 f"{len(docs)} documents, meta dim {meta['dim']}); rebuild it: {INDEX_FIX}")
            if meta.get("dense_index") == "hnsw":
                index.hnsw.efSearch = self.config.hnsw_ef_search
            if self._encoder is None or self._encoder.name != meta["encoder"]:
                self._encoder = encoder_from_settings(meta["encoder"], meta["encoder_settings"])
            self._index, self._docs, self.meta = index, docs, meta
        return self._index

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        check_search(queries, k)
        index = self._open()
        results: list[list[Hit]] = [[] for _ in queries]
        todo = [(i, q) for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
        if not todo or index.ntotal == 0:
            return results
        assert self._encoder is not None
        vectors = self._encoder.encode_queries([q for _, q in todo])
        scores, rows = index.search(np.ascontiguousarray(vectors, dtype=np.float32), min(k, index.ntotal))
        for (i, _q), srow, rrow in zip(todo, scores, rows):
            hits = []
            for score, row in zip(srow, rrow):
                if row < 0:  # HNSW may return fewer than k
                    continue
                d = self._docs[row]
                hits.append(Hit(id=d.id, title=d.title, text=d.text, score=float(score)))
            results[i] = hits
        return results

    def count(self) -> int:
        return int(self._open().ntotal)

    def close(self) -> None:
        self._index = None
        self._docs = []
