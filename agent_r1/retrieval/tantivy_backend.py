"""Embedded BM25 retrieval with tantivy (the default backend: no server, on-disk index).

Layout: `index_dir/tantivy/` holds the tantivy files; `index_dir/retriever.json` is written
by `agent-r1 index`. Searching only opens the index and a searcher (no writer, hence no
writer lock), so any number of processes (rollout workers) can search the same directory.

Queries are never given to tantivy's query parser: model-written text such as
`AND OR "( ) title:foo *` would be parsed as syntax (and can raise). Instead the query is run
through the same analyzer the index uses (`en_stem`: simple tokenizer, remove-long, lowercase,
English stemmer) and turned into SHOULD term queries on `title` and `text`, i.e. a sum of
per-field BM25 scores like Elasticsearch's `multi_match` `most_fields`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tantivy

from agent_r1.data.io import built_aside
from agent_r1.data.schema import Document
from agent_r1.retrieval.base import INDEX_FIX, Hit, SearchConfig, check_search, register_retriever

SUBDIR = "tantivy"
SEARCH_FIELDS = ("title", "text")
_WRITER_HEAP = 128 * 1024 * 1024


def build_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("title", stored=True, tokenizer_name="en_stem")
    sb.add_text_field("text", stored=True, tokenizer_name="en_stem")
    return sb.build()


def query_analyzer() -> tantivy.TextAnalyzer:
    """Mirror of tantivy's built-in `en_stem` analyzer, applied to query text in Python."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _has_field(schema: tantivy.Schema, name: str) -> bool:
    try:
        tantivy.Query.term_query(schema, name, "probe")
    except ValueError:
        return False
    return True


@register_retriever("tantivy")
class TantivyRetriever:
    """BM25 over title + text with tantivy. See the module docstring for the query model."""

    def __init__(self, config: SearchConfig) -> None:
        if not config.index_dir:
            raise ValueError("the tantivy backend needs an index directory (SearchConfig.index_dir)")
        self.config = config
        self.root = Path(config.index_dir)
        self.path = self.root / SUBDIR
        self._schema = build_schema()
        self._analyzer = query_analyzer()
        self._index: tantivy.Index | None = None
        self._searcher: tantivy.Searcher | None = None

    # ------------------------------------------------------------------ building
    def index(self, docs: Iterable[Document]) -> int:
        """Build a fresh index from `docs` (replacing any previous one) and return the count.

        Built in a sibling temp directory of this process's own (two builders never share one) and
        renamed into place; the old index is moved aside and removed only after the new one is in,
        so a failed build never leaves a half-written index where readers look, and the index is
        missing only between two renames (a reader that has it open keeps its files).
        """
        self.close()
        # an index folder an older version built has its own meta.json (owned.py: legacy)
        with built_aside(self.path, "search.index_dir", ("meta.json",)) as tmp:
            index = tantivy.Index(self._schema, path=str(tmp))
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            n = 0
            for doc in docs:
                writer.add_document(tantivy.Document(id=doc.id, title=doc.title, text=doc.text))
                n += 1
            writer.commit()
            writer.wait_merging_threads()
            del writer, index
        return n

    # ------------------------------------------------------------------ searching
    def _open(self) -> tantivy.Searcher:
        if self._searcher is None:
            if not (self.path / "meta.json").is_file():
                raise FileNotFoundError(f"no tantivy index in {self.root} (missing {self.path}/meta.json); {INDEX_FIX}")
            try:
                self._index = tantivy.Index.open(str(self.path))
                self._searcher = self._index.searcher()
            except ValueError as err:
                raise ValueError(f"tantivy index in {self.root} is corrupt or incompatible ({err}); "
                                 f"rebuild it: {INDEX_FIX}") from None
            missing = [f for f in ("id", *SEARCH_FIELDS) if not _has_field(self._index.schema, f)]
            if missing:
                self.close()
                raise ValueError(f"tantivy index in {self.root} lacks field(s) {missing}; rebuild it: {INDEX_FIX}")
        return self._searcher

    def tokens(self, query: str) -> list[str]:
        """The analyzed terms of `query` (what is actually searched)."""
        return self._analyzer.analyze(query) if query else []

    def _query(self, query: str) -> tantivy.Query | None:
        # Repeated terms are searched once, as tantivy's own query parser does.
        terms = list(dict.fromkeys(self.tokens(query)))
        if not terms:
            return None
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, field, term))
            for term in terms
            for field in SEARCH_FIELDS
        ]
        return tantivy.Query.boolean_query(clauses)

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        check_search(queries, k)
        searcher = self._open()
        results: list[list[Hit]] = []
        for q in queries:
            query = self._query(q if isinstance(q, str) else str(q))
            if query is None:
                results.append([])
                continue
            found = searcher.search(query, limit=k, count=False).hits
            hits = []
            for score, address in found:
                doc = searcher.doc(address)
                hits.append(Hit(id=doc["id"][0], title=doc["title"][0], text=doc["text"][0], score=float(score)))
            results.append(hits)
        return results

    def count(self) -> int:
        return int(self._open().num_docs)

    def close(self) -> None:
        self._searcher = None
        self._index = None
