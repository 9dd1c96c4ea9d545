"""The offline buffer: records MLflow has not taken yet, in a folder shared by processes.

Files in the folder
- `pending.jsonl`  one record a line, each with a unique `rid`; only ever appended to, except by a
                   compaction (below). A line cut short by a kill during an append is skipped and
                   reported, then set aside into `rejected.jsonl` by the next flush; an append after
                   such a line starts a new line first, so it never glues onto the broken one.
- `progress.log`   the flush journal: `b <rid>` before a record is sent, `d <rid>` once MLflow took
                   it. A flush killed at any point replays from here: done records are never resent,
                   and a record begun but not done is known to be uncertain (see transport.py).
- `rejected.jsonl` what MLflow refused, unreadable lines and records of refused runs, each with its
                   reason (`error`). Nothing in it is retried.
- `runs.json`      buffered run key -> MLflow run id, written as soon as MLflow creates the run.
- `blobs/`         copies of artifacts logged while offline (the originals may change or be pruned).
                   A pending artifacts record is uploaded from, and then removes, `blobs/<its rid>`
                   and nothing else: pending.jsonl is a file anyone can edit, so a path in it is
                   never trusted (`own_blob`); a record naming any other folder is set aside.
- `.lock`          an flock taken for every change to the files above (short: no network inside).
- `.flush.lock`    an flock held by the one process flushing; others append meanwhile.

Compaction runs under `.lock` at the end of a flush: pending.jsonl is rewritten without the done
records (and lines other processes appended meanwhile are kept, in order), then progress.log keeps
only the begin marks of records still pending.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_r1.tracking.filelock import FileLock
from agent_r1.tracking.files import copy_artifact
from agent_r1.tracking.records import BadRecord

_RID = re.compile(r"[0-9a-f]{32}")  # what `append` gives a record: uuid4().hex, a safe folder name


@dataclass
class Scan:
    """What pending.jsonl holds now: readable records not yet done, in order; unreadable lines."""

    records: list[dict[str, Any]] = field(default_factory=list)
    partial: list[tuple[int, str]] = field(default_factory=list)  # (line number, the line's start)
    in_flight: set[str] = field(default_factory=set)  # rids begun by a flush that never finished them
    done: set[str] = field(default_factory=set)
    done_records: list[dict[str, Any]] = field(default_factory=list)


def _read_jsonl(path: Path) -> tuple[list[tuple[dict[str, Any], bytes]], list[tuple[int, str]]]:
    """(record, raw line) for each readable line; (line number, start of line) for the others."""
    if not path.exists():
        return [], []
    good, bad = [], []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:  # a cut UTF-8 sequence or cut JSON alike
            record = None
        if isinstance(record, dict):
            good.append((record, raw))
        else:
            bad.append((number, raw[:200].decode("utf-8", "replace")))
    return good, bad


def _append_line(path: Path, line: bytes) -> None:
    """Appends one line; a file that ends mid-line (a writer killed mid-append) gets its newline first."""
    with path.open("ab+") as f:  # reads may seek; writes always go to the end
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line + b"\n")


class RecordBuffer:
    """An append-only JSONL of records MLflow has not taken yet, shared by a run, its children and any
    other process (a second training run, `python -m agent_r1.tracking flush`)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.pending_path = self.root / "pending.jsonl"
        self.rejected_path = self.root / "rejected.jsonl"
        self.map_path = self.root / "runs.json"
        self.journal_path = self.root / "progress.log"
        self.lock = FileLock(self.root / ".lock")
        self.flush_lock = FileLock(self.root / ".flush.lock")

    def _ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    # run ids -------------------------------------------------------------------------------------
    def run_ids(self) -> dict[str, str]:
        if not self.map_path.exists():
            return {}
        fix = f"it maps buffered runs to MLflow run ids: restore it, or delete it only if {self.pending_path} is empty"
        try:
            ids = json.loads(self.map_path.read_text())
        except ValueError as err:  # written atomically, so only a hand edit gets here
            raise ValueError(f"{self.map_path} is not valid JSON ({err}); {fix}") from err
        if not (isinstance(ids, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in ids.items())):
            raise ValueError(f"{self.map_path} is not a mapping of run keys to run ids (a {type(ids).__name__}); {fix}")
        return ids

    def remember(self, key: str, run_id: str) -> None:
        with self.lock:
            self._ensure()
            ids = self.run_ids()
            ids[key] = run_id
            tmp = self.map_path.with_name(f".runs.{uuid.uuid4().hex}.tmp")
            tmp.write_text(json.dumps(ids, indent=1))
            os.replace(tmp, self.map_path)

    # records -------------------------------------------------------------------------------------
    def _journal(self) -> tuple[set[str], set[str]]:
        """(begun, done) rids; a line cut by a kill is ignored (its record is simply redone)."""
        begun: set[str] = set()
        done: set[str] = set()
        if self.journal_path.exists():
            for line in self.journal_path.read_bytes().decode("utf-8", "replace").splitlines():
                mark, _, rid = line.partition(" ")
                if len(rid) >= 32:
                    (done if mark == "d" else begun if mark == "b" else set()).add(rid)
        return begun, done

    def scan(self) -> Scan:
        with self.lock:
            good, bad = _read_jsonl(self.pending_path)
            begun, done = self._journal()
        scan = Scan(partial=bad, done=done)
        for record, raw in good:
            if "rid" not in record:  # written before records had ids: one derived from the line
                record["rid"] = "legacy-" + hashlib.sha1(raw).hexdigest()
            if record["rid"] in done:
                scan.done_records.append(record)
            else:
                scan.records.append(record)
        scan.in_flight = begun & {r["rid"] for r in scan.records}
        return scan

    def pending(self) -> list[dict[str, Any]]:
        return self.scan().records

    def append(self, record: dict[str, Any]) -> None:
        self._ensure()
        record = {**record, "rid": record.get("rid") or uuid.uuid4().hex}
        if record.get("op") == "artifacts":  # the files may change or be pruned: keep a copy
            # outside the lock (a checkpoint copy takes a while); the blob's name is new, so no one
            # else touches it before the line naming it is written
            blob = self.root / "blobs" / record["rid"]
            src = Path(record["local_path"])
            if src.is_dir() and not src.is_symlink():
                copy_artifact(src, blob, record.get("files"))  # its own files: links never followed (files.py)
            else:
                blob.mkdir(parents=True)
                shutil.copy2(src, blob / src.name, follow_symlinks=False)  # a link is copied as one, never followed
                record = {**record, "file_name": src.name}
            record = {**record, "local_path": str(blob), "blob": True}
        line = json.dumps(record, default=str).encode()
        with self.lock:
            _append_line(self.pending_path, line)

    def begin(self, record: dict[str, Any]) -> dict[str, Any]:
        """Appends a record about to be sent at once, with its begin mark, in one step under the lock: if
        the send's outcome is never learnt, a flush replays it as uncertain (see transport.py)."""
        self._ensure()
        record = {**record, "rid": record.get("rid") or uuid.uuid4().hex}
        line = json.dumps(record, default=str).encode()
        with self.lock:
            _append_line(self.pending_path, line)
            _append_line(self.journal_path, f"b {record['rid']}".encode())
        return record

    def mark(self, rid: str, done: bool) -> None:
        with self.lock:
            self._ensure()
            _append_line(self.journal_path, f"{'d' if done else 'b'} {rid}".encode())

    def compact(self) -> list[tuple[int, str]]:
        """Drops done records from pending.jsonl and sets unreadable lines aside; returns those lines."""
        with self.lock:
            scan = self.scan()
            for number, text in scan.partial:
                self.reject({"line": number, "raw": text},
                            f"unreadable line {number} of {self.pending_path.name} (cut short by a kill "
                            f"during an append?)")
            for record in scan.done_records:
                self.drop_blob(record)
            if not (scan.partial or scan.done_records):
                return []
            self._write_lines(self.pending_path, [json.dumps(r, default=str) for r in scan.records])
            self._write_lines(self.journal_path, [f"b {rid}" for rid in sorted(scan.in_flight)])
            return scan.partial

    def _write_lines(self, path: Path, lines: list[str]) -> None:
        if not lines:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        os.replace(tmp, path)

    def rewrite(self, records: list[dict[str, Any]]) -> None:
        """Replaces pending.jsonl by `records` (and forgets the journal): for tools and tests only."""
        with self.lock:
            self._write_lines(self.pending_path, [json.dumps(r, default=str) for r in records])
            self.journal_path.unlink(missing_ok=True)

    # set aside -----------------------------------------------------------------------------------
    def reject(self, record: dict[str, Any], error: str) -> None:
        with self.lock:
            self._ensure()
            _append_line(self.rejected_path, json.dumps({**record, "error": error}, default=str).encode())

    def rejected_runs(self) -> dict[str, str]:
        """Run key -> why MLflow refused to create that run (from rejected.jsonl)."""
        with self.lock:
            good, _ = _read_jsonl(self.rejected_path)
        return {r["key"]: str(r.get("error", "")) for r, _ in good
                if r.get("op") == "create_run" and isinstance(r.get("key"), str)}

    def rejected_count(self) -> int:
        with self.lock:
            good, bad = _read_jsonl(self.rejected_path)
        return len(good) + len(bad)

    # blobs ---------------------------------------------------------------------------------------
    def own_blob(self, record: dict[str, Any]) -> Path:
        """The buffer's own copy a pending artifacts record stands for: `<root>/blobs/<rid>`.

        The record's `local_path` must name that copy (by its last two parts, so a buffer folder that
        was moved still flushes); the path used is always rebuilt from this buffer's root. Anything
        else (another folder, `..`, a record without a blob) raises BadRecord: set aside, with nothing
        uploaded and nothing deleted."""
        rid, named = str(record.get("rid", "")), Path(str(record.get("local_path", "")))
        file_name = record.get("file_name")
        ok = (record.get("blob") is True and _RID.fullmatch(rid) is not None and named.name == rid
              and named.parent.name == "blobs" and ".." not in named.parts
              and (file_name is None or (isinstance(file_name, str) and file_name not in ("", ".", "..")
                                         and Path(file_name).name == file_name)))
        if not ok:
            raise BadRecord(f"a buffered artifacts record must name this buffer's own copy {self.root / 'blobs'}/<rid> "
                            f"(with a plain file_name), not {named}: refused, nothing uploaded or deleted. "
                            f"Buffered artifacts are always copied there; a record naming anything else was "
                            f"edited or came from elsewhere. To upload that folder, log it from a run instead.")
        return self.root / "blobs" / rid

    def sendable(self, record: dict[str, Any]) -> dict[str, Any]:
        """`record` as a flush may send it: an artifacts record points at its own blob (or raises)."""
        if record.get("op") != "artifacts":
            return record
        return {**record, "local_path": str(self.own_blob(record))}

    def drop_blob(self, record: dict[str, Any]) -> None:
        """Removes a sent (or refused) record's blob; a record naming any other folder removes nothing."""
        if record.get("op") != "artifacts" or not record.get("blob"):
            return
        try:
            blob = self.own_blob(record)
        except BadRecord:
            return
        shutil.rmtree(blob, ignore_errors=True)
