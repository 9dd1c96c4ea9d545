"""The run's retrieval settings (`search:` in params.yaml) and the one way a run opens its index.

`SearchConfig` is what a user sets; `RetrievalConfig` (base.py) is what a backend is built from,
stored in the index's retriever.json. A run's own settings win over what the index folder says for
the request timeout and connection pool, and credentials only ever go to the run's own URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_r1.retrieval.base import VECTOR_BACKENDS, RetrievalConfig, Retriever, open_index


@dataclass
class SearchConfig:
    # tantivy | elasticsearch (BM25) | dense | hybrid | elasticsearch-dense | elasticsearch-hybrid
    backend: str = "tantivy"
    index_dir: str = "data/index"
    url: str = ""  # Elasticsearch URL (auth comes from environment variables)
    index_name: str = "agent-r1-corpus"
    k: int = 3
    max_chars_per_doc: int = 300
    timeout_s: float = 10.0
    es_pool_size: int = 10  # Elasticsearch: HTTP connections per process (one pooled client per rollout worker)
    # dense / hybrid backends: the encoder (minilm works offline; hf:<id or folder> for bge, e5, ...),
    # the faiss index (flat | hnsw), and where corpus embeddings are cached by content hash
    encoder: str = "minilm"
    dense_index: str = "flat"
    embed_cache_dir: str = ""  # "" = $AGENT_R1_EMBED_CACHE or ~/.cache/agent-r1/embeddings

    def server_url(self) -> str:
        """The Elasticsearch URL this config names (`url`, or the backend's default when empty)."""
        return self.url or RetrievalConfig.url


def index_options(search: SearchConfig) -> dict[str, Any]:
    """Backend options for building the index: Elasticsearch's address, the vector backends' encoder."""
    options: dict[str, Any] = {"url": search.server_url(), "index_name": search.index_name}
    if search.backend in VECTOR_BACKENDS:
        options.update(encoder=search.encoder, dense_index=search.dense_index,
                       embed_cache_dir=search.embed_cache_dir or None)
    return options


def open_search_index(search: SearchConfig, index_dir: str | Path | None = None, check: bool = True) -> Retriever:
    """The retriever of `index_dir` (default `search.index_dir`). Elasticsearch requests time out within
    `search.timeout_s`: the tool runner abandons a search thread at that timeout, and the request under
    it must end soon after instead of holding a socket for the client's default 60 s (each retry
    attempt is bounded the same way). Elasticsearch credentials go only to the run's own search URL,
    whatever retriever.json says."""
    return open_index(index_dir or search.index_dir, check=check, request_timeout_s=search.timeout_s,
                      pool_size=search.es_pool_size, credentials_url=search.server_url())
