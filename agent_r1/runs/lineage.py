"""Content hashes that chain a run to what made it: data -> index -> warm start -> run -> checkpoint.

Every hash is a SHA-256 (hex, first 16 characters shown as a short id) of bytes, never of paths or
times, so the same inputs hash the same on any machine. Hashing a large corpus is not free, so file
digests are cached by (path, size, mtime) in `<runs_dir>/.cache/digests.json`; a changed file has a
new size or mtime and is read again. The same cache holds the corpus SHA-1 an index records
(`ensure_index`), so a run's every reopening does not read the whole corpus again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_r1.config import ExperimentConfig

SHORT = 16  # characters of a hash shown in names and tags (64 bits: no collision among runs here)


def short(digest: str | None) -> str:
    return (digest or "")[:SHORT]


def hash_json(value: Any) -> str:
    """The hash of a JSON-able value (keys sorted, so dict order never matters)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class DigestCache:
    """File digests (SHA-256 unless another hashlib algorithm is named) keyed by (absolute path, size,
    mtime_ns); a plain JSON file, rewritten atomically. A SHA-256 entry is keyed by the path alone
    (as caches written before other algorithms were held), any other by `<algorithm>:<path>`."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, list[Any]] = {}
        if path is not None and path.is_file():
            try:
                self.entries = json.loads(path.read_text())
            except (OSError, ValueError):
                self.entries = {}  # a torn cache costs one re-read, never a wrong hash
        self.dirty = False

    def file(self, file: Path, algorithm: str = "sha256") -> str:
        st = file.stat()
        key = str(file.resolve())
        if algorithm != "sha256":
            key = f"{algorithm}:{key}"
        hit = self.entries.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return str(hit[2])
        h = hashlib.new(algorithm)
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        self.entries[key] = [st.st_size, st.st_mtime_ns, h.hexdigest()]
        self.dirty = True
        return h.hexdigest()

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.entries))
        os.replace(tmp, self.path)
        self.dirty = False


def digest_cache(cfg: ExperimentConfig) -> DigestCache:
    """The digest cache shared by every run under `train.runs_dir`."""
    return DigestCache(Path(cfg.train.runs_dir) / ".cache" / "digests.json")


def hash_tree(folder: str | Path, cache: DigestCache | None = None, skip: tuple[str, ...] = ()) -> str:
    """The hash of a folder's content: every file's relative path and SHA-256, in sorted order."""
    folder = Path(folder)
    cache = cache or DigestCache(None)
    parts = []
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = file.relative_to(folder).as_posix()
        if rel.split("/")[0] in skip:
            continue
        parts.append([rel, cache.file(file)])
    if not parts:
        raise FileNotFoundError(f"{folder} holds no files to hash")
    return hash_json(parts)


def data_hash(data_dir: Path, files: tuple[str, ...], cache: DigestCache | None = None) -> str:
    """The data a run reads: its question files and the corpus (when there is one)."""
    cache = cache or DigestCache(None)
    names = sorted({*files, "corpus.jsonl"})
    return hash_json([[n, cache.file(data_dir / n)] for n in names if (data_dir / n).is_file()])


def index_hash(index_dir: Path, search: Any) -> str:
    """The index a run searches: its build manifest (backend, corpus SHA-1, settings) and the search
    settings that shape what a query returns (k, characters per document)."""
    manifest = Path(index_dir) / "retriever.json"
    built = json.loads(manifest.read_text()) if manifest.is_file() else {}
    # paths and server addresses say where, not what: the same corpus indexed elsewhere hashes the same
    built = {k: v for k, v in built.items() if k not in ("corpus", "index_dir", "url")}
    return hash_json({"index": built, "k": search.k, "max_chars_per_doc": search.max_chars_per_doc})


def checkpoint_hash(checkpoint: str | Path) -> str:
    """The content hash of a checkpoint folder (weights, tokenizer, state, manifest)."""
    return hash_tree(checkpoint)
