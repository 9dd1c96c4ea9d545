"""Elasticsearch retrieval through the official `elasticsearch` client.

- Explicit mapping: `title` is english-analyzed text with a `keyword` sub-field (exact title
  filters), `text` uses the `english` analyzer, `id` is a keyword. Relying on dynamic mapping
  would give the `standard` analyzer (no stemming) and silently different rankings.
- Queries are `multi_match` `most_fields` over title and text: the query text is analyzed
  as plain text, never parsed as query syntax (no `query_string`), so model output cannot
  inject operators; `most_fields` sums per-field scores like the tantivy backend.
- Calls retry with exponential backoff on connection errors, timeouts and HTTP 429, then
  raise a ServiceUnavailableError (a RuntimeError) naming the URL and what to do; the tool
  runner lets it through, so a training run stops there (resumable) instead of continuing on
  error observations.
- One client per process, shared by its threads: the client's HTTP connection pool is bounded
  (`es_pool_size` connections to each node; a thread past that waits for a free one, which its holder
  returns within the request timeout), so a rollout worker holds at most that many sockets to the
  cluster however many searches it runs at once. A forked child (a multiprocessing 'fork' worker,
  the tool runner's workers) never uses its parent's sockets: the client is re-created on first use
  in a new process id. (A Ray worker is a fresh process: it builds its own client in open_index.)
- Credentials come only from AGENT_R1_ES_API_KEY or AGENT_R1_ES_USER/AGENT_R1_ES_PASSWORD
  and are never logged, printed, or written to retriever.json. They go only to the URL the user's
  own settings name (`SearchConfig.trusted_url()`: a run's search.url, a command's --url), never
  to one read from an index folder's retriever.json alone (a DVC output anyone with the remote can
  write): such a mismatch is refused before any request is sent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from elasticsearch import ApiError, ConnectionError, ConnectionTimeout, Elasticsearch, helpers
from tqdm import tqdm

from agent_r1.data.schema import Document
from agent_r1.retrieval.base import INDEX_FIX, Hit, SearchConfig, check_search, register_retriever
from agent_r1.retrieval.errors import ServiceUnavailableError
from agent_r1.retrieval.es_owner import (
    AGENT_R1_MARKER,
    opened_refusal,
    owner_of,
    replace_refusal,
    with_owner,
)
from agent_r1.retrieval.search import check_url_credentials

log = logging.getLogger(__name__)
T = TypeVar("T")

ENV_API_KEY = "AGENT_R1_ES_API_KEY"
ENV_USER = "AGENT_R1_ES_USER"
ENV_PASSWORD = "AGENT_R1_ES_PASSWORD"

SEARCH_FIELDS = ["title", "text"]

MAPPING: dict[str, Any] = {
    "_meta": AGENT_R1_MARKER,
    "properties": {
        "id": {"type": "keyword"},
        "title": {
            "type": "text",
            "analyzer": "english",
            "fields": {"keyword": {"type": "keyword", "ignore_above": 512}},
        },
        "text": {"type": "text", "analyzer": "english"},
    }
}
SETTINGS: dict[str, Any] = {"number_of_shards": 1, "number_of_replicas": 0}


# Guards client re-creation after a fork. Module-level, not per retriever, so it can be replaced in the
# child: a lock held by another parent thread at fork time would otherwise stay held there for ever.
_CLIENT_LOCK = threading.Lock()


def _new_lock_in_child() -> None:
    global _CLIENT_LOCK
    _CLIENT_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


class _Retryable(Exception):
    """Internal: a per-item 429 inside an otherwise successful msearch response."""


def auth_from_env() -> dict[str, Any]:
    """Client auth kwargs from the environment (values are secrets: never log them)."""
    api_key = os.environ.get(ENV_API_KEY)
    if api_key:
        return {"api_key": api_key}
    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    if user and password:
        return {"basic_auth": (user, password)}
    if user or password:
        raise ValueError(f"set both {ENV_USER} and {ENV_PASSWORD} (or {ENV_API_KEY}) for Elasticsearch auth")
    return {}


def same_server(a: str, b: str) -> bool:
    """Whether two URLs reach the same server: scheme, host and port (the default port filled in)."""
    def origin(url: str) -> tuple[str, str, int | None]:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        try:
            port = parts.port or {"http": 80, "https": 443}.get(scheme)
        except ValueError:
            port = -1  # unparsable: equal to nothing real
        return scheme, (parts.hostname or "").lower(), port
    return bool(a and b) and origin(a) == origin(b)


def auth_for(config: SearchConfig) -> dict[str, Any]:
    """Client auth kwargs for `config.server_url()`: the environment's credentials, only when that URL is
    the one the user's settings name; refused otherwise (naming both URLs and the fix, never the secret).
    The URLs hold no credentials (refused at construction), so naming them is safe."""
    auth = auth_from_env()
    url, trusted = config.server_url(), config.trusted_url()
    if auth and not same_server(url, trusted):
        raise ValueError(
            f"the index folder {config.index_dir}'s retriever.json names the Elasticsearch server {url}, "
            f"but the URL your settings name is {trusted if trusted else '(none)'}; credentials from "
            f"{ENV_API_KEY} / {ENV_USER}+{ENV_PASSWORD} go only to that one. If you trust {url}, "
            f"name it (search.url={url} for a run, --url for a command); otherwise rebuild the "
            f"index with `agent-r1 index --url YOUR_URL`")
    return auth


def multi_match(query: str, k: int) -> dict[str, Any]:
    """The search body for one query (kept public so tests and docs show the exact query)."""
    return {
        "size": k,
        "query": {"multi_match": {"query": query, "fields": SEARCH_FIELDS, "type": "most_fields"}},
        "_source": ["id", "title", "text"],
    }


@register_retriever("elasticsearch")
class ElasticsearchRetriever:
    """BM25 over title + text in an Elasticsearch index (see the module docstring)."""

    def __init__(self, config: SearchConfig) -> None:
        url = config.server_url()
        check_url_credentials(url)  # it would be printed in errors and written to retriever.json
        if config.es_pool_size < 1:
            raise ValueError(f"es_pool_size must be >= 1, got {config.es_pool_size}")
        self.config = config
        self.url = url
        self.index_name = config.index_name
        self._closed = False
        # (owner pid, client): one tuple, read and replaced whole, so a thread never sees a client
        # paired with another process's pid. Built now so bad auth settings fail at construction.
        self._owned: tuple[int, Any] = (os.getpid(), self._new_client())

    def _new_client(self) -> Elasticsearch:
        # The transport's own retries are off: _call owns the policy, so attempts and the
        # final error message are the same for every operation.
        return Elasticsearch(
            self.url, request_timeout=self.config.timeout_s, max_retries=0,
            retry_on_timeout=False, connections_per_node=self.config.es_pool_size, **auth_for(self.config),
        )

    @property
    def client(self) -> Any:
        """This process's client (thread-safe; its pool holds at most `es_pool_size` connections a node)."""
        pid, client = self._owned
        if pid == os.getpid() and client is not None:
            return client
        with _CLIENT_LOCK:
            if self._closed:
                raise RuntimeError(f"the Elasticsearch retriever for {self.url} index {self.index_name!r} is closed")
            if self._owned[0] != os.getpid():
                # Inherited through fork: the parent's sockets stay the parent's. Not closed here (that
                # is the parent's to do); dropping our copies of the descriptors leaves its connections open.
                self._owned = (os.getpid(), self._new_client())
            return self._owned[1]

    @client.setter
    def client(self, value: Any) -> None:  # tests substitute a recorder for the client
        self._owned = (os.getpid(), value)

    def pool_stats(self) -> dict[str, int]:
        """This process's HTTP pools, summed over nodes: connections opened so far, requests sent, the bound."""
        pools = [node.pool for node in self.client.transport.node_pool.all() if getattr(node, "pool", None)]
        return {"pid": os.getpid(), "pool_size": self.config.es_pool_size,
                "connections_opened": sum(p.num_connections for p in pools),
                "requests": sum(p.num_requests for p in pools)}

    # ------------------------------------------------------------------ retry policy
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        attempts = self.config.retry_attempts
        delay = self.config.retry_backoff_s
        last: Exception | None = None
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except (ConnectionError, ConnectionTimeout, _Retryable) as err:
                last = err
            except ApiError as err:
                if err.status_code != 429:
                    raise RuntimeError(
                        f"Elasticsearch at {self.url} rejected {what} on index {self.index_name!r}: "
                        f"HTTP {err.status_code} {err.error}") from err
                last = err
            if attempt < attempts:
                log.warning("Elasticsearch %s failed (%s, attempt %d/%d); retrying in %.2fs",
                            what, type(last).__name__, attempt, attempts, delay)
                time.sleep(delay)
                delay *= 2
        raise ServiceUnavailableError(  # a RuntimeError; the tool runner lets it stop the run
            f"Elasticsearch at {self.url} did not answer {what} after {attempts} attempt(s) "
            f"({type(last).__name__}: {last}). Check that the server is running and reachable "
            f"at that URL (or pass --url), that credentials in {ENV_API_KEY} / {ENV_USER}+{ENV_PASSWORD} "
            f"are right, or raise retry_attempts (search.retry_attempts) if it is overloaded."
        ) from last

    # ------------------------------------------------------------------ building
    def create_index(self) -> None:
        """Drop and recreate the index with the explicit mapping (index() is a full rebuild).

        An existing index is dropped only if agent-r1 made it from this index folder (its mapping's
        `_meta`: es_owner.py) or `config.overwrite` is set; otherwise this raises, naming the index, whose
        it is and the way out."""
        owner = owner_of(self.config.index_dir)
        mapping = with_owner(self.index_mapping(), owner)

        def create() -> None:
            existing = self._existing_mappings()
            if existing is not None:
                refusal = replace_refusal(existing, owner, self.index_name, self.url)
                if refusal and not self.config.overwrite:
                    raise RuntimeError(refusal)
                self.client.indices.delete(index=self.index_name, ignore_unavailable=True)
            self.client.indices.create(index=self.index_name, mappings=mapping, settings=SETTINGS)
        self._call("index creation", create)

    def index_mapping(self) -> dict[str, Any]:
        """The mapping `create_index` gives a new index (subclasses add fields, e.g. a vector)."""
        return MAPPING

    def _existing_mappings(self) -> dict[str, Any] | None:
        """{concrete index: mappings} behind `index_name` (an alias may name several), or None."""
        try:
            resp = self.client.indices.get_mapping(index=self.index_name)
        except ApiError as err:
            if err.status_code == 404:
                return None
            raise
        return {name: body.get("mappings", {}) for name, body in dict(resp).items()}

    def _actions(self, docs: Iterable[Document]) -> Iterator[dict[str, Any]]:
        for doc in docs:
            yield {"_index": self.index_name, "_id": doc.id,
                   "_source": {"id": doc.id, "title": doc.title, "text": doc.text}}

    def index(self, docs: Iterable[Document]) -> int:
        """Recreate the index, bulk-load `docs` in chunks, refresh; returns the count.

        Each chunk is retried as a whole on connection failure; documents carry their id as
        `_id`, so a re-sent chunk overwrites rather than duplicates.
        """
        self.create_index()
        n = 0
        chunk: list[Document] = []
        size = self.config.bulk_chunk_size
        with tqdm(desc=f"indexing into {self.index_name}", unit="doc", disable=None) as bar:
            for doc in docs:
                chunk.append(doc)
                if len(chunk) >= size:
                    n += self._bulk(chunk)
                    bar.update(len(chunk))
                    chunk = []
            if chunk:
                n += self._bulk(chunk)
                bar.update(len(chunk))
        self._call("refresh", lambda: self.client.indices.refresh(index=self.index_name))
        return n

    def _bulk(self, chunk: list[Document]) -> int:
        def send() -> int:
            ok = 0
            for success, _info in helpers.streaming_bulk(
                self.client, self._actions(chunk), chunk_size=len(chunk), raise_on_error=True,
                max_retries=self.config.retry_attempts - 1,
                initial_backoff=self.config.retry_backoff_s, max_backoff=30,
            ):
                ok += bool(success)
            return ok
        try:
            return self._call("bulk indexing", send)
        except helpers.BulkIndexError as err:
            first = err.errors[0] if err.errors else {}
            raise RuntimeError(f"Elasticsearch at {self.url} rejected {len(err.errors)} document(s) "
                               f"in index {self.index_name!r}; first: {str(first)[:300]}") from None

    # ------------------------------------------------------------------ searching
    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        check_search(queries, k)
        results: list[list[Hit]] = [[] for _ in queries]
        # Blank queries are answered locally with no hits (ES would error on some of them).
        todo = [(i, q) for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
        if not todo:
            return results
        vectors = self._query_vectors([q for _, q in todo])
        step = max(1, self.config.msearch_batch_size)
        for start in range(0, len(todo), step):
            batch = todo[start:start + step]
            hits = self._search_batch([q for _, q in batch], vectors[start:start + step], k)
            for (i, _q), h in zip(batch, hits):
                results[i] = h
        return results

    def _query_vectors(self, queries: list[str]) -> Sequence[Any]:
        """What `_search_batch` gets per query besides its text: nothing for BM25 (the dense backends'
        query vectors)."""
        return [None] * len(queries)

    def _search_batch(self, queries: list[str], vectors: Sequence[Any], k: int) -> list[list[Hit]]:
        items = self._send([multi_match(q, k) for q in queries])
        return [self._hits(item, f"the query {q[:80]!r}") for q, item in zip(queries, items)]

    def _send(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One msearch of `bodies` (retried as a whole, a per-item 429 included); its response items."""
        searches: list[dict[str, Any]] = []
        for body in bodies:
            searches += [{"index": self.index_name}, body]

        def send() -> list[dict[str, Any]]:
            items = self.client.msearch(searches=searches)["responses"]
            if any(item.get("status") == 429 for item in items):
                raise _Retryable("an msearch item was rejected with HTTP 429")
            return items
        return self._call("msearch", send)

    def _hits(self, item: dict[str, Any], what: str) -> list[Hit]:
        if "error" in item:
            err = item["error"]
            if isinstance(err, dict) and err.get("type") == "index_not_found_exception":
                raise FileNotFoundError(f"Elasticsearch index {self.index_name!r} not found at {self.url}; {INDEX_FIX}")
            reason = err.get("reason", err) if isinstance(err, dict) else err
            raise RuntimeError(f"Elasticsearch at {self.url} failed {what}: {reason}")
        return [Hit(id=str(h["_source"].get("id", h["_id"])), title=h["_source"].get("title", ""),
                    text=h["_source"].get("text", ""), score=float(h["_score"] or 0.0))
                for h in item["hits"]["hits"]]

    def count(self) -> int:
        def count() -> int:
            try:
                return int(self.client.count(index=self.index_name)["count"])
            except ApiError as err:
                if err.status_code == 404:
                    raise FileNotFoundError(
                        f"Elasticsearch index {self.index_name!r} not found at {self.url}; {INDEX_FIX}") from None
                raise
        return self._call("count", count)

    def check_opened(self) -> None:
        """Raises when another index folder has rebuilt this folder's index (es_owner.py): its searches
        would return that folder's corpus. Called by open_index after the first probe."""
        refusal = opened_refusal(self.mapping(), owner_of(self.config.index_dir), self.index_name, self.url)
        if refusal:
            raise RuntimeError(refusal)

    def mapping(self) -> dict[str, Any]:
        """The index mapping as the server reports it (for checks and debugging)."""
        resp = self._call("get mapping", lambda: self.client.indices.get_mapping(index=self.index_name))
        return dict(resp)[self.index_name]["mappings"]

    def close(self) -> None:
        """Closes this process's connections. A forked child that never searched closes nothing (its
        inherited client is the parent's); calls after close() raise RuntimeError."""
        with _CLIENT_LOCK:
            pid, client = self._owned
            self._closed = True
            self._owned = (os.getpid(), None)
        if pid == os.getpid() and client is not None:
            client.close()
