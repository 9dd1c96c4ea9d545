"""Build retrieval corpora (lists of `Document`) from QA releases that ship their paragraphs.

Document ids are content hashes (`sha1(title \\n text)[:16]`): stable across runs, machines
and input order, identical for the same paragraph seen in several questions (which is what
deduplication keys on), and identical across retrieval backends, so ranking agreement
between tantivy and Elasticsearch can be measured by id.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from agent_r1.data.io import RowError, iter_records
from agent_r1.data.schema import Document

PathLike = str | os.PathLike[str]


def doc_id(title: str, text: str) -> str:
    """Stable id of a paragraph: first 16 hex digits of sha1(title + newline + text)."""
    return hashlib.sha1(f"{title}\n{text}".encode("utf-8")).hexdigest()[:16]


def make_document(title: str, text: str, id: str | None = None) -> Document:
    return Document(id=id or doc_id(title, text), title=title, text=text)


def dedup_documents(docs: Iterable[Document]) -> list[Document]:
    """Keep the first occurrence of each (title, text), preserving order."""
    seen: set[tuple[str, str]] = set()
    out: list[Document] = []
    for doc in docs:
        key = (doc.title, doc.text)
        if key not in seen:
            seen.add(key)
            out.append(doc)
    return out


def _context_paragraphs(path: Path, line: int, row: Any) -> Iterator[Document]:
    """Paragraphs of one HotpotQA / 2Wiki row: `context` = [[title, [sentences...]], ...].

    HotpotQA sentences carry their own leading space (" Although ..."); they are stripped
    and joined with one space so the text has no double spaces.
    """
    if not isinstance(row, dict) or not isinstance(row.get("context"), list):
        raise RowError(path, line, "missing or non-list field 'context'",
                       "use the distractor/fullwiki release, which has context paragraphs")
    for item in row["context"]:
        if (not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], list)):
            raise RowError(path, line, f"bad context entry {str(item)[:60]!r}",
                           "each context entry is [\"Title\", [\"sentence\", ...]]")
        title, sentences = item
        text = " ".join(str(s).strip() for s in sentences if str(s).strip())
        yield make_document(title, text)


def _musique_paragraphs(path: Path, line: int, row: Any) -> Iterator[Document]:
    if not isinstance(row, dict) or not isinstance(row.get("paragraphs"), list):
        raise RowError(path, line, "missing or non-list field 'paragraphs'",
                       "use the official MuSiQue release, which has paragraphs")
    for p in row["paragraphs"]:
        if not isinstance(p, dict) or "title" not in p or "paragraph_text" not in p:
            raise RowError(path, line, "paragraph without 'title'/'paragraph_text'",
                           "each paragraph is {\"title\": ..., \"paragraph_text\": ...}")
        yield make_document(str(p["title"]), str(p["paragraph_text"]).strip())


def _build(path: Path, paragraphs: Callable[[Path, int, Any], Iterable[Document]],
           skip_bad: bool) -> list[Document]:
    docs: list[Document] = []
    for rec in iter_records(path, skip_bad=skip_bad):
        try:
            docs.extend(paragraphs(path, rec.line, rec.value))
        except RowError:
            if not skip_bad:
                raise
    if not docs:
        raise ValueError(f"{path}: no paragraphs found; is this a release with context paragraphs?")
    return dedup_documents(docs)


def build_corpus_from_hotpotqa(path: PathLike, skip_bad: bool = False) -> list[Document]:
    """Union of all context paragraphs of a HotpotQA (or official 2Wiki) file, deduplicated.

    On the shared 400 dev-distractor examples this gives 3,952 paragraphs. With `skip_bad`,
    rows the question loader would skip are skipped here too.
    """
    return _build(Path(path), _context_paragraphs, skip_bad)


def build_corpus_from_musique(path: PathLike, skip_bad: bool = False) -> list[Document]:
    """Union of all `paragraphs` of an official MuSiQue file, deduplicated."""
    return _build(Path(path), _musique_paragraphs, skip_bad)


def has_paragraphs(path: PathLike, skip_bad: bool = False) -> bool:
    """Whether the first readable row of a QA file carries paragraphs (questions-only files do not)."""
    for rec in iter_records(path, skip_bad=skip_bad):
        if isinstance(rec.value, dict):
            return "context" in rec.value or "paragraphs" in rec.value
    return False


def load_corpus_jsonl(path: PathLike) -> list[Document]:
    """A corpus JSONL of {title, text} rows (`id` optional; derived from content when absent).

    Duplicate ids are an error: a retriever keyed by id would silently drop one of them.
    """
    return list(iter_corpus_jsonl(path))


def iter_corpus_jsonl(path: PathLike) -> Iterator[Document]:
    """`load_corpus_jsonl` one document at a time, so an index build never holds the corpus (a
    million-passage corpus is 1-1.5 GB as Documents). A bad row raises when it is reached: builders
    write aside and rename in, so a failed build leaves the old index in place."""
    path = Path(path)
    first_line: dict[str, int] = {}
    for rec in iter_records(path):
        row = rec.value
        if not isinstance(row, dict):
            raise RowError(path, rec.line, "expected a JSON object", "each row is {\"title\", \"text\"}")
        title, text = row.get("title"), row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RowError(path, rec.line, "missing or empty field 'text'",
                           "every corpus row needs a non-empty \"text\"")
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise RowError(path, rec.line, "field 'title' must be a string", "write \"title\" as text")
        rid = row.get("id")
        doc = make_document(title, text, str(rid) if rid not in (None, "") else None)
        if doc.id in first_line:
            raise RowError(path, rec.line, f"duplicate id {doc.id!r} (first on line {first_line[doc.id]})",
                           "make ids unique or drop the duplicate row")
        first_line[doc.id] = rec.line
        yield doc
