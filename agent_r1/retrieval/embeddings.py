"""Corpus embeddings, cached by what made them.

A corpus is encoded once per (corpus content, encoder, encoder settings): the vectors go to
`<cache>/<key>.npy` and the document ids, in row order, to `<key>.json`, where `key` hashes those
three. A second index build over the same corpus with the same encoder (a rebuild, the hybrid
backend's dense half, the Elasticsearch dense index, a DVC `embed` stage before `index`) loads
them instead of encoding again. Files are written aside and renamed in, so a reader never sees a
half-written cache and two builders racing write the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent_r1.data.schema import Document
from agent_r1.retrieval.base import VECTOR_BACKENDS
from agent_r1.retrieval.encoders import DEFAULT_ENCODER, Encoder, get_encoder

ENV_CACHE = "AGENT_R1_EMBED_CACHE"


def default_cache_dir() -> Path:
    """$AGENT_R1_EMBED_CACHE, else ~/.cache/agent-r1/embeddings (shared by every index on this machine)."""
    env = os.environ.get(ENV_CACHE)
    return Path(env) if env else Path.home() / ".cache" / "agent-r1" / "embeddings"


def passage_text(doc: Document) -> str:
    """What a passage vector encodes: the title (Wikipedia-style corpora put the entity there) and the text."""
    return f"{doc.title}. {doc.text}" if doc.title else doc.text


def docs_sha1(docs: Sequence[Document]) -> str:
    """Content identity of a corpus as indexed (ids, titles, texts in order), independent of the file."""
    h = hashlib.sha1()
    for d in docs:
        h.update(json.dumps([d.id, d.title, d.text], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def cache_key(corpus_sha1: str, encoder: Encoder) -> str:
    blob = json.dumps({"corpus": corpus_sha1, "encoder": encoder.name, "settings": encoder.settings()},
                      sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:24]


@dataclass
class EmbeddedCorpus:
    """Row i of `vectors` [n, dim] float32 is the passage vector of document `ids[i]`."""

    ids: list[str]
    vectors: np.ndarray
    key: str
    path: Path
    from_cache: bool
    corpus_sha1: str


def _write_atomic(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


def embed_documents(docs: Sequence[Document], encoder: Encoder, cache_dir: str | os.PathLike[str] | None = None
                    ) -> EmbeddedCorpus:
    """Passage vectors of `docs`, from the cache when a matching entry exists, else encoded and cached."""
    docs = list(docs)
    sha = docs_sha1(docs)
    key = cache_key(sha, encoder)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    vec_path, ids_path = cache / f"{key}.npy", cache / f"{key}.json"
    ids = [d.id for d in docs]
    if vec_path.is_file() and ids_path.is_file():
        try:
            meta = json.loads(ids_path.read_text(encoding="utf-8"))
            vectors = np.load(vec_path, allow_pickle=False)
        except (ValueError, OSError, json.JSONDecodeError):
            meta, vectors = {}, None  # corrupt or half-copied: encode again and overwrite
        if vectors is not None and meta.get("ids") == ids and vectors.shape == (len(ids), encoder.dim):
            return EmbeddedCorpus(ids, vectors.astype(np.float32, copy=False), key, vec_path, True, sha)
    vectors = encoder.encode_passages([passage_text(d) for d in docs]) if docs else \
        np.zeros((0, encoder.dim), dtype=np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    _write_atomic(vec_path, lambda f: np.save(f, vectors, allow_pickle=False))
    meta = {"ids": ids, "corpus_sha1": sha, "encoder": encoder.name, "settings": encoder.settings(),
            "dim": encoder.dim}
    _write_atomic(ids_path, lambda f: f.write(json.dumps(meta).encode()))
    return EmbeddedCorpus(ids, vectors, key, vec_path, False, sha)


def embed_corpus(corpus: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None,
                 encoder: str = DEFAULT_ENCODER, **settings: Any) -> Path:
    """Encode a corpus JSONL into the cache (a no-op when already there); returns the .npy path.
    This is the pipeline's `embed` step, run between prepare and index for backends that need vectors."""
    from agent_r1.data.corpus import load_corpus_jsonl

    return embed_documents(load_corpus_jsonl(corpus), get_encoder(encoder, **settings), cache_dir).path


def embed_for_search(search: Any, data_dir: str | os.PathLike[str]) -> Path | None:
    """The pipeline's embed step for a `search` config section (backend, encoder, embed_cache_dir):
    encodes `data_dir/corpus.jsonl` into the cache and returns the .npy path, or returns None without
    loading any model when the backend needs no vectors (tantivy, elasticsearch)."""
    if search.backend not in VECTOR_BACKENDS:
        return None
    return embed_corpus(Path(data_dir) / "corpus.jsonl", search.embed_cache_dir or None,
                        search.encoder or DEFAULT_ENCODER)
