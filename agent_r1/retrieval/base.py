"""The retriever contract, the backend registry, and opening an index directory.

An index directory (written by `agent-r1 index --out DIR`) always holds `retriever.json`
naming the backend and how to reach it, so callers (the rollout search tool, evaluation)
open any backend the same way: `open_index(DIR)`. Backends register themselves with
`@register_retriever(name)`; built-in backends are imported only when first asked for, so
using tantivy never imports the Elasticsearch client and vice versa.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from agent_r1.data.schema import Document
from agent_r1.registry import NoTraits, Registry

MANIFEST = "retriever.json"
# The most hits one query may ask for: each backend holds k hits per query of a batch in memory, and
# tantivy allocates for k up front (k = 1e12 asked for 16 TB and aborted the process). The config's
# search.k has the same ceiling (schema.LIMITS).
MAX_K = 1000


def check_k(k: object) -> int:
    """`k` when it is an integer in [1, MAX_K]; a ValueError naming the range otherwise."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValueError(f"k must be in [1, {MAX_K}], got {k!r}")
    return k
INDEX_FIX = "build it with `agent-r1 index --corpus CORPUS.jsonl --out DIR`"


@dataclass(frozen=True)
class Hit:
    """One retrieved document. Scores are backend-specific: compare rankings, not scores."""

    id: str
    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RetrievalConfig:
    """How to open a retriever.

    `index_dir` is the directory holding retriever.json (tantivy keeps its files in
    `index_dir/tantivy`); `url`/`index_name` address an Elasticsearch index. Credentials are
    never part of the config (they come from AGENT_R1_ES_* environment variables), so a
    config can be written to disk and logged safely.
    """

    backend: str = "tantivy"
    index_dir: Path | None = None
    url: str = "http://127.0.0.1:9200"
    index_name: str = "agent-r1-corpus"
    k: int = 5
    retry_attempts: int = 5        # total tries for Elasticsearch calls
    retry_backoff_s: float = 0.5   # first backoff; doubles each retry
    request_timeout_s: float = 60.0
    bulk_chunk_size: int = 500
    msearch_batch_size: int = 100
    pool_size: int = 10            # Elasticsearch: HTTP connections per node, per process (never in retriever.json)
    overwrite: bool = False        # index(): replace an existing index agent-r1 did not make (never in retriever.json)
    # dense and hybrid backends (encoders.py, dense_backend.py, hybrid_backend.py, es_dense.py)
    encoder: str = "minilm"        # an encoder name (encoders.py) or hf:<hub id or folder>
    dense_index: str = "flat"      # flat (exact inner product) | hnsw (faiss)
    hnsw_m: int = 32
    hnsw_ef_construction: int = 200
    hnsw_ef_search: int = 128
    encode_batch_size: int = 64
    rrf: str = "auto"              # hybrid on Elasticsearch: server (retriever.rrf) | client | auto
    embed_cache_dir: str | None = None  # corpus embeddings cached by content hash (never in retriever.json)
    # The URL the user's own settings name (a run's search.url, a command's --url): the only one the
    # Elasticsearch backends send AGENT_R1_ES_* credentials to. None: this config's own `url` (the config
    # was built from the user's settings); "" (a config read from retriever.json): none until the
    # caller names one. Never in retriever.json: a file is not the user.
    credentials_url: str | None = None

    def to_manifest(self) -> dict[str, Any]:
        """The retriever.json content: what is needed to reopen this index, nothing secret."""
        data: dict[str, Any] = {"backend": self.backend}
        if self.backend.startswith("elasticsearch"):
            data.update(url=self.url, index_name=self.index_name)
        if self.backend in VECTOR_BACKENDS:
            data.update(encoder=self.encoder, dense_index=self.dense_index, hnsw_ef_search=self.hnsw_ef_search,
                        rrf=self.rrf)
        return data

    @classmethod
    def from_manifest(cls, data: dict[str, Any], index_dir: Path) -> "RetrievalConfig":
        known = {f.name for f in fields(cls)}
        # overwrite, and whom to trust with credentials, are the user's decisions, never a file's
        kwargs = {k: v for k, v in data.items() if k in known and k not in _NOT_FROM_FILES}
        return cls(index_dir=index_dir, **kwargs, credentials_url="")

    def trusted_url(self) -> str:
        """The URL credentials may go to ("" for none)."""
        return self.url if self.credentials_url is None else self.credentials_url


# fields a retriever.json may not set (the user's own decisions, or this machine's)
_NOT_FROM_FILES = ("index_dir", "overwrite", "embed_cache_dir", "credentials_url")


@runtime_checkable
class Retriever(Protocol):
    """A document index searched in batches (one round-trip per rollout turn)."""

    def index(self, docs: Iterable[Document]) -> int:
        """(Re)build the index from `docs`; returns the number indexed."""
        ...

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Top-`k` hits for each query, in query order. Never raises on odd query text;
        an empty query gets no hits."""
        ...

    def count(self) -> int:
        """Number of indexed documents (raises a clear error if the index is missing)."""
        ...

    def close(self) -> None: ...


R = TypeVar("R", bound=type)

#: backend name -> retriever class (constructed as cls(config)); built-in backends are imported lazily
RETRIEVERS: Registry[type, NoTraits] = Registry(
    "retrieval backend", key="search.backend", where="agent_r1.retrieval.base.RETRIEVERS", builtins={
        "tantivy": "agent_r1.retrieval.tantivy_backend",
        "elasticsearch": "agent_r1.retrieval.es_backend",
        "dense": "agent_r1.retrieval.dense_backend",
        "hybrid": "agent_r1.retrieval.hybrid_backend",
        "elasticsearch-dense": "agent_r1.retrieval.es_dense",
        "elasticsearch-hybrid": "agent_r1.retrieval.es_dense",
    })
#: backends that search by embeddings (their index build needs the corpus encoded)
VECTOR_BACKENDS = ("dense", "hybrid", "elasticsearch-dense", "elasticsearch-hybrid")


def register_retriever(name: str) -> Callable[[R], R]:
    """Class decorator adding a backend to RETRIEVERS under `name`."""
    return RETRIEVERS.register(name)


def backend_names() -> list[str]:
    return RETRIEVERS.names()


def open_retriever(config: RetrievalConfig) -> Retriever:
    """Construct the configured backend (does not require the index to exist yet)."""
    RETRIEVERS.check(config.backend)
    return RETRIEVERS[config.backend](config)


def write_manifest(config: RetrievalConfig, extra: dict[str, Any] | None = None) -> Path:
    """Write index_dir/retriever.json for `config` (plus informational `extra` fields)."""
    if config.index_dir is None:
        raise ValueError("RetrievalConfig.index_dir is required to write retriever.json")
    index_dir = Path(config.index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    data = {**config.to_manifest(), **(extra or {})}
    path = index_dir / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_manifest(index_dir: str | os.PathLike[str]) -> RetrievalConfig:
    index_dir = Path(index_dir)
    path = index_dir / MANIFEST
    if not path.is_file():
        what = "does not exist" if not index_dir.exists() else f"has no {MANIFEST}"
        raise FileNotFoundError(f"index directory {index_dir} {what}; {INDEX_FIX}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is corrupt ({err}); rebuild it: {INDEX_FIX}") from None
    if not isinstance(data, dict) or "backend" not in data:
        raise ValueError(f"{path} names no backend; rebuild it: {INDEX_FIX}")
    return RetrievalConfig.from_manifest(data, index_dir)


def open_index(index_dir: str | os.PathLike[str], check: bool = True, **overrides: Any) -> Retriever:
    """Open the retriever described by index_dir/retriever.json.

    With `check` (default) the index is probed once (`count()`), so a missing/corrupt index
    or an unreachable server fails here, at startup, rather than mid-rollout. `overrides`
    replace config fields (e.g. retry_attempts=1).
    """
    config = read_manifest(index_dir)
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise ValueError(f"unknown retrieval option {key!r}")
        setattr(config, key, value)
    retriever = open_retriever(config)
    if check:
        try:
            retriever.count()
            # a backend may also check the index is still the one this folder made (es_owner.py)
            getattr(retriever, "check_opened", lambda: None)()
        except BaseException:
            retriever.close()
            raise
    return retriever


__all__ = [
    "Hit", "RetrievalConfig", "Retriever", "RETRIEVERS", "register_retriever", "open_retriever",
    "open_index", "read_manifest", "write_manifest", "backend_names", "MANIFEST", "INDEX_FIX",
]


def corpus_sha1(path: str | os.PathLike[str]) -> str:
    """Identity of a corpus file: an index records it, so a changed corpus triggers a rebuild."""
    import hashlib

    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


def build_index(corpus: str | os.PathLike[str], index_dir: str | os.PathLike[str], backend: str = "tantivy",
                **options: Any) -> int:
    """Indexes a corpus JSONL into `index_dir` and writes its manifest; returns the doc count."""
    from agent_r1.data.corpus import iter_corpus_jsonl

    # a first pass checks every row before any backend touches its index (Elasticsearch recreates
    # its index in place); then the documents stream in, never all in memory (dense backends make
    # their own list, since they embed the whole corpus)
    for _ in iter_corpus_jsonl(corpus):
        pass
    docs = iter_corpus_jsonl(corpus)
    config = RetrievalConfig(backend=backend, index_dir=Path(index_dir), **options)
    retriever = open_retriever(config)
    try:
        n = retriever.index(docs)
        extra = getattr(retriever, "manifest_extra", dict)()  # e.g. the encoder's dimension and revision
    finally:
        retriever.close()
    write_manifest(config, {**extra, "num_docs": n, "corpus": str(corpus), "corpus_sha1": corpus_sha1(corpus)})
    return n
