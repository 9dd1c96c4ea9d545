"""The one retrieval config: `SearchConfig`, both the `search:` section of params.yaml and what every
backend is built from, so a setting a user writes reaches the backend as it is (schema.LIMITS gives the
ranges). Params files and every run's config.json name these keys: each keeps its name, meaning and default.

- `url` "" is DEFAULT_ES_URL, resolved by `server_url()`, which every backend and retriever.json use, so
  an index folder records the full address.
- `timeout_s` (10 s) bounds each Elasticsearch request of a run's searches: the tool runner abandons a
  search at that timeout, and the request under it must end then too, not hold a socket for a minute.
  Work no tool call waits on (an index build's bulk requests, the `agent-r1 index/search` commands,
  `open_index` without a caller's config) waits COMMAND_TIMEOUT_S.
- `k` (3) is the run's hits per query; no backend reads it (`search()` is given k).

An index folder's retriever.json records how the index was built and where it lives
(base.MANIFEST_FIELDS); opening a folder takes those from the file and the rest (timeouts, pool, retries,
batch sizes) from the opener's config (base.read_manifest).

Credentials are never part of the config: they come from the AGENT_R1_ES_* environment variables, and go
only to `trusted_url()` (es_backend.auth_for), so a config can be written to disk and logged safely.

This module imports nothing from the project: the config tree (agent_r1/config.py) and the backends
(base.py and below) both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

DEFAULT_ES_URL = "http://127.0.0.1:9200"
# query parameters that carry a credential (lower-cased, '-' read as '_'): never in a search URL
SECRET_QUERY_KEYS = frozenset({"api_key", "apikey", "key", "token", "access_token", "auth", "password", "secret"})
CREDENTIALS_FIX = "set AGENT_R1_ES_API_KEY or AGENT_R1_ES_USER/AGENT_R1_ES_PASSWORD instead"


def url_credentials(url: str) -> str:
    """Where `url` carries a credential ("" where it carries none), named without the secret."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        return "its user part (user:password@)"
    keys = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)
                   if k.lower().replace("-", "_") in SECRET_QUERY_KEYS})
    return f"its query ({', '.join(f'{k}=' for k in keys)})" if keys else ""


def check_url_credentials(url: str, what: str = "the Elasticsearch URL") -> None:
    """Refuses a URL that carries a credential: it would be written to an index folder's retriever.json
    (a DVC output others may read) and printed in errors."""
    where = url_credentials(url)
    if where:
        raise ValueError(f"{what} holds credentials in {where}; remove them and {CREDENTIALS_FIX}")
# The Elasticsearch request timeout of work no tool call waits on: building an index (bulk requests of
# bulk_chunk_size documents, with vectors for the dense backends) and one-off commands.
COMMAND_TIMEOUT_S = 60.0
RRF_MODES = ("auto", "server", "client")  # elasticsearch-hybrid fusion (es_dense.py)
DENSE_INDEXES = ("flat", "hnsw")  # embedded dense / hybrid faiss index types (dense_backend.py)


@dataclass
class SearchConfig:
    # tantivy | elasticsearch (BM25) | dense | hybrid | elasticsearch-dense | elasticsearch-hybrid
    backend: str = "tantivy"
    # the folder holding retriever.json (tantivy and faiss keep their files in it); "" = none, for an
    # Elasticsearch index used from code (its mapping then names no owning folder: es_owner.py)
    index_dir: str = "data/index"
    url: str = ""  # Elasticsearch URL; "" = DEFAULT_ES_URL (auth comes from environment variables)
    index_name: str = "agent-r1-corpus"
    k: int = 3
    max_chars_per_doc: int = 300
    # the search tool's timeout, and each Elasticsearch request's (see the module docstring)
    timeout_s: float = 10.0
    es_pool_size: int = 10  # Elasticsearch: HTTP connections per process (one pooled client per rollout worker)
    # dense / hybrid backends: the encoder (minilm works offline; hf:<id or folder> for bge, e5, ...),
    # the faiss index (flat | hnsw), and where corpus embeddings are cached by content hash
    encoder: str = "minilm"
    dense_index: str = "flat"
    embed_cache_dir: str = ""  # "" = $AGENT_R1_EMBED_CACHE or ~/.cache/agent-r1/embeddings

    # -- backend tuning --
    # Elasticsearch: tries per call on connection errors, timeouts and HTTP 429; the first wait between
    # them, doubled each retry (then the run stops, resumable, instead of training on error observations)
    retry_attempts: int = 5
    retry_backoff_s: float = 0.5
    bulk_chunk_size: int = 500  # Elasticsearch: documents per bulk request when indexing
    msearch_batch_size: int = 100  # Elasticsearch: queries per msearch request
    # Elasticsearch: an index build may replace an existing index agent-r1 did not make, or another folder
    # made (its documents are lost); off, such a build is refused. Never read from retriever.json
    overwrite: bool = False
    # embedded dense / hybrid with dense_index hnsw: graph neighbours per node, and the build's and each
    # search's breadth (higher: better recall, slower); hnsw_ef_search is recorded in retriever.json
    hnsw_m: int = 32
    hnsw_ef_construction: int = 200
    hnsw_ef_search: int = 128
    encode_batch_size: int = 64  # passages per encoder batch when indexing
    # elasticsearch-hybrid: fuse BM25 and kNN in the server (retriever.rrf, ES >= 8.14, licensed), here
    # (client), or auto: the server until it refuses once, then here
    rrf: str = "auto"
    # The Elasticsearch server trusted with the AGENT_R1_ES_* credentials: None = `url` (a config written
    # by the user trusts its own server); "" = none (a config whose url an index folder's retriever.json
    # named: the folder is a DVC output, not the user); or a URL, like `agent-r1 search --url`
    credentials_url: str | None = None

    def server_url(self) -> str:
        """The Elasticsearch URL this config names (`url`, or DEFAULT_ES_URL when empty)."""
        return self.url or DEFAULT_ES_URL

    def trusted_url(self) -> str:
        """The URL credentials may go to ("" for none)."""
        return self.server_url() if self.credentials_url is None else self.credentials_url
