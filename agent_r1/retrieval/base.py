"""The retriever contract, the backend registry, and opening an index directory.

An index directory (written by `agent-r1 index --out DIR`) always holds `retriever.json`
naming the backend and how to reach it, so callers (the rollout search tool, evaluation)
open any backend the same way: `open_index(DIR)`, or `open_index(DIR, cfg.search)` with the
opener's own settings for what the folder does not record. Every backend is constructed from the one
retrieval config, `SearchConfig` (search.py), as `cls(config)`. Backends register themselves with
`@register_retriever(name)`; built-in backends are imported only when first asked for, so
using tantivy never imports the Elasticsearch client and vice versa.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from agent_r1.data.schema import Document
from agent_r1.registry import NoTraits, Registry
from agent_r1.retrieval.search import COMMAND_TIMEOUT_S, SearchConfig, check_url_credentials

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


def check_search(queries: object, k: object) -> None:
    """What every backend's `search(queries, k)` refuses: one string for the list, k out of range."""
    if isinstance(queries, str):
        raise TypeError("search() takes a list of queries; wrap a single query as [query]")
    check_k(k)


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


def open_retriever(config: SearchConfig) -> Retriever:
    """Construct the configured backend (does not require the index to exist yet)."""
    RETRIEVERS.check(config.backend)
    return RETRIEVERS[config.backend](config)


# What retriever.json records about an index, in this order: how it was built and where it lives. Everything
# else (timeouts, pool, retries, batch sizes, overwrite, the embedding cache, whom to trust with
# credentials) is the opener's to say, never a file's.
ES_FIELDS = ("url", "index_name")
VECTOR_FIELDS = ("encoder", "dense_index", "hnsw_ef_search", "rrf")
MANIFEST_FIELDS = ("backend", *ES_FIELDS, *VECTOR_FIELDS)


def manifest_of(config: SearchConfig) -> dict[str, Any]:
    """The retriever.json content for `config`: what is needed to reopen its index, nothing secret."""
    data: dict[str, Any] = {"backend": config.backend}
    if config.backend.startswith("elasticsearch"):
        check_url_credentials(config.server_url(), "search.url")  # a file others may read: never a secret
        data.update(url=config.server_url(), index_name=config.index_name)  # "" written as the address it means
    if config.backend in VECTOR_BACKENDS:
        data.update({name: getattr(config, name) for name in VECTOR_FIELDS})
    return data


def write_manifest(config: SearchConfig, extra: dict[str, Any] | None = None) -> Path:
    """Write index_dir/retriever.json for `config` (plus informational `extra` fields)."""
    if not config.index_dir:
        raise ValueError("SearchConfig.index_dir is required to write retriever.json")
    index_dir = Path(config.index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    data = {**manifest_of(config), **(extra or {})}
    path = index_dir / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_manifest(index_dir: str | os.PathLike[str], config: SearchConfig | None = None) -> SearchConfig:
    """The config that opens `index_dir`: what its retriever.json records (MANIFEST_FIELDS) over `config`,
    the opener's own settings. Credentials may go only to the server `config` trusts (its own url unless
    it says otherwise); without a `config`, to none, and requests wait COMMAND_TIMEOUT_S (no tool call
    waits on them)."""
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
    recorded = {name: data[name] for name in MANIFEST_FIELDS if name in data}
    base = config if config is not None else SearchConfig(timeout_s=COMMAND_TIMEOUT_S, credentials_url="")
    # trusted_url() is taken before the file's url replaces the opener's: a file is not the user
    return replace(base, **recorded, index_dir=str(index_dir), credentials_url=base.trusted_url())


def open_index(index_dir: str | os.PathLike[str], config: SearchConfig | None = None, check: bool = True,
               **overrides: Any) -> Retriever:
    """Open the retriever described by index_dir/retriever.json, with `config`'s settings for what the
    file does not record (read_manifest): a run passes its `search` section, so its timeout_s bounds each
    Elasticsearch request, its es_pool_size bounds the connections, and credentials go only to its url.

    With `check` (default) the index is probed once (`count()`), so a missing/corrupt index
    or an unreachable server fails here, at startup, rather than mid-rollout. `overrides`
    replace config fields last (e.g. retry_attempts=1, credentials_url=a command's --url).
    """
    unknown = sorted(set(overrides) - {f.name for f in fields(SearchConfig)})
    if unknown:
        raise ValueError(f"unknown retrieval option {unknown[0]!r}")
    retriever = open_retriever(replace(read_manifest(index_dir, config), **overrides))
    if check:
        try:
            retriever.count()
            # a backend may also check the index is still the one this folder made (es_owner.py)
            getattr(retriever, "check_opened", lambda: None)()
        except BaseException:
            retriever.close()
            raise
    return retriever


def corpus_sha1(path: str | os.PathLike[str]) -> str:
    """Identity of a corpus file: an index records it, so a changed corpus triggers a rebuild."""
    import hashlib

    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


def build_index(corpus: str | os.PathLike[str], index_dir: str | os.PathLike[str], backend: str | None = None,
                config: SearchConfig | None = None, **options: Any) -> int:
    """Indexes a corpus JSONL into `index_dir` and writes its manifest; returns the doc count. The settings
    are `config` (default: SearchConfig()'s, a tantivy index) with `backend` and `options` (SearchConfig
    field names) over it; a run passes its `search` section."""
    from agent_r1.data.corpus import iter_corpus_jsonl

    # a first pass checks every row before any backend touches its index (Elasticsearch recreates
    # its index in place); then the documents stream in, never all in memory (dense backends make
    # their own list, since they embed the whole corpus)
    for _ in iter_corpus_jsonl(corpus):
        pass
    docs = iter_corpus_jsonl(corpus)
    config = replace(config or SearchConfig(), **({"backend": backend} if backend else {}), **options,
                     index_dir=str(index_dir))
    # bulk requests carry bulk_chunk_size documents: a search's timeout_s is too short for them, and no
    # tool call waits on a build (a longer timeout_s still applies)
    config.timeout_s = max(config.timeout_s, COMMAND_TIMEOUT_S)
    retriever = open_retriever(config)
    try:
        n = retriever.index(docs)
        extra = getattr(retriever, "manifest_extra", dict)()  # e.g. the encoder's dimension and revision
    finally:
        retriever.close()
    write_manifest(config, {**extra, "num_docs": n, "corpus": str(corpus), "corpus_sha1": corpus_sha1(corpus)})
    return n
