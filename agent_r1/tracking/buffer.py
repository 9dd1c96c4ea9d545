"""The local record of what MLflow has not taken yet: a folder shared by processes, and what a record may hold.

- `pending.jsonl`  one record a line, each with its own `rid`, in the order logged. A flush sends them in
                   order, then rewrites the file without those it delivered or set aside (lines appended
                   meanwhile are kept). A line cut short by a kill is set aside; an append after it starts
                   a new line first.
- `rejected.jsonl` what can never be sent, with the reason (`error`).
- `runs.json`      run key -> MLflow run id of every run created, so any process can send its records.
- `blobs/<rid>/`   the copy of an artifact logged while MLflow was away (the original may be pruned). A
                   pending artifacts record is sent from that copy only: pending.jsonl is a file anyone can
                   edit, so a path in it is never read (`sendable`).
- `.lock`          held for every change to these files (short); `.flush.lock`: held by the one sender.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from agent_r1.filelock import FileLock

REQUIRED_FIELDS = {
    "create_run": ("key", "experiment", "time_ms"), "params": ("key", "params"), "tags": ("key", "tags"),
    "metrics": ("key", "metrics", "step", "time_ms"), "table": ("key", "columns", "artifact_file"),
    "artifacts": ("key", "local_path"), "end": ("key", "status", "time_ms"),
    "trace": ("key", "experiment", "trace_key", "root")}
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")
_RID = re.compile(r"[0-9a-f]{32}")  # what `append` gives a record: uuid4().hex, a safe folder name


class BadRecord(Exception):
    """A record that can never be sent (malformed, its run refused, its artifact copy gone)."""


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _name(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _map(ok: Any) -> Any:
    return lambda v: isinstance(v, dict) and all(isinstance(k, str) and ok(x) for k, x in v.items())


def _or_none(ok: Any) -> Any:
    return lambda v: v is None or ok(v)


def _relative(v: Any) -> bool:
    return isinstance(v, list) and all(_name(f) and not f.startswith("/") and ".." not in f.split("/") for f in v)


_SCALARS = _map(lambda x: isinstance(x, (str, int, float, bool)))
# field -> (what it must be, the check); a field a record lacks is not checked here
FIELD_SHAPES = {
    "key": ("a non-empty string", _name), "experiment": ("a non-empty string", _name),
    "name": ("a string or null", _or_none(_text)), "parent_key": ("a string or null", _or_none(_text)),
    "time_ms": ("an integer", _int), "step": ("an integer", _int),
    "params": ("a mapping of names to values", _SCALARS), "tags": ("a mapping of names to values", _or_none(_SCALARS)),
    "metrics": ("a mapping of names to numbers", _map(lambda x: _int(x) or isinstance(x, float))),
    "columns": ("a mapping of column names to lists", _map(lambda x: isinstance(x, list))),
    "artifact_file": ("a string", _text), "local_path": ("a string", _text),
    "artifact_path": ("a string or null", _or_none(_text)),
    "files": ("a list of relative paths or null", _or_none(_relative)),
    "file_name": ("a plain file name or null", _or_none(lambda v: _name(v) and Path(v).name == v != "..")),
    "status": (f"one of {', '.join(RUN_STATUSES)}", lambda v: v in RUN_STATUSES),
    "trace_key": ("a string", _text), "root": ("a span tree (a mapping)", lambda v: isinstance(v, dict))}


def check_record(record: Any) -> None:
    """Raises BadRecord naming what is wrong with `record`: its op, a field's type, text that is not
    valid Unicode (JSON's `"\\udcff"` reads as a lone surrogate, which no store can encode)."""
    if not isinstance(record, dict):
        raise BadRecord(f"a record must be a JSON object, got {type(record).__name__}")
    op = record.get("op")
    if not isinstance(op, str) or op not in REQUIRED_FIELDS:
        raise BadRecord(f"unknown tracking record op {str(op)[:40]!r} (known: {', '.join(REQUIRED_FIELDS)})")
    missing = [f for f in REQUIRED_FIELDS[op] if f not in record]
    if missing:
        raise BadRecord(f"a {op!r} record lacks {', '.join(missing)}")
    for field, value in record.items():
        what, ok = FIELD_SHAPES.get(field, ("", None))
        if ok is not None and not ok(value):
            raise BadRecord(f"a {op!r} record's {field!r} must be {what}, got {type(value).__name__} "
                            f"{str(value)[:60]!r}")
    try:
        json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError as err:
        raise BadRecord(f"a {op!r} record holds text that is not valid Unicode (a lone surrogate such as "
                        f"{err.object[err.start:err.end]!r}; {err.reason}): no store can encode it") from None
    except (TypeError, ValueError, RecursionError) as err:
        raise BadRecord(f"a {op!r} record is not JSON ({type(err).__name__}: {str(err)[:120]})") from None


def artifact_files(root: str | Path, only: list[str] | None = None) -> list[Path]:
    """The regular files under `root` (relative, sorted), never through a link: a link in a checkpoint
    may point anywhere (a home folder's `.ssh`). A file `root` gives itself; `only`: just these of them
    (what a checkpoint's manifest lists). Raises BadRecord for a `root` that is a link or missing."""
    root = Path(root)
    if root.is_symlink():
        raise BadRecord(f"{root} is a symbolic link: not uploaded (only a run's own files are)")
    if root.is_file():
        return [Path(root.name)]
    if not root.is_dir():
        raise BadRecord(f"the artifact {root} is gone")
    found = []
    for folder, _, files in os.walk(root):  # os.walk does not enter links to folders
        found += [Path(folder, f).relative_to(root) for f in files
                  if not os.path.islink(os.path.join(folder, f)) and os.path.isfile(os.path.join(folder, f))]
    wanted = None if only is None else {Path(f) for f in only}
    return sorted(f for f in found if wanted is None or f in wanted)


def _append_line(path: Path, line: bytes) -> None:
    """Appends one line; a file that ends mid-line (a writer killed mid-append) gets its newline first."""
    with path.open("ab+") as f:
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            line = line if f.read(1) == b"\n" else b"\n" + line
        f.write(line + b"\n")


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """(the readable records, each with a `rid`; (line number, start) of each unreadable line)."""
    good, bad = [], []
    for number, raw in enumerate(path.read_bytes().split(b"\n") if path.exists() else [], start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:  # a cut UTF-8 sequence or cut JSON alike
            record = None
        if isinstance(record, dict):  # a line written by hand has no rid: one derived from the line
            good.append({**record, "rid": record.get("rid") or "line-" + hashlib.sha1(raw).hexdigest()})
        else:
            bad.append((number, raw[:200].decode("utf-8", "replace")))
    return good, bad


def _write_lines(path: Path, lines: list[str]) -> None:
    if not lines:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    os.replace(tmp, path)


class RecordBuffer:
    """The folder of records MLflow has not taken yet (see the module doc), shared by a run, its children
    and any other process (a second training run, `python -m agent_r1.tracking flush`)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.pending_path, self.rejected_path = self.root / "pending.jsonl", self.root / "rejected.jsonl"
        self.map_path = self.root / "runs.json"
        self.lock, self.flush_lock = FileLock(self.root / ".lock"), FileLock(self.root / ".flush.lock")

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Queues `record` (an artifact is copied first: its own files, never through a link)."""
        record = {**record, "rid": record.get("rid") or uuid.uuid4().hex}
        if record["op"] == "artifacts":
            src = Path(record["local_path"])
            files = artifact_files(src, record.get("files"))
            blob = self.root / "blobs" / record["rid"]  # a new name: no one else touches it until the line is written
            blob.mkdir(parents=True)
            for rel in files:
                (blob / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2((src.parent if src.is_file() else src) / rel, blob / rel, follow_symlinks=False)
            record.update(local_path=str(blob), blob=True, **({"file_name": src.name} if src.is_file() else {}))
        with self.lock:
            _append_line(self.pending_path, json.dumps(record, default=str).encode())
        return record

    def scan(self) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
        """(the records waiting, in order; the unreadable lines)."""
        with self.lock:
            return _read_jsonl(self.pending_path)

    def pending(self) -> list[dict[str, Any]]:
        return self.scan()[0]

    def compact(self, done: set[str]) -> list[tuple[int, str]]:
        """Drops the records `done` names (and their copies) and sets unreadable lines aside; returns those lines."""
        with self.lock:
            records, partial = _read_jsonl(self.pending_path)
            for number, text in partial:
                why = f"unreadable line {number} of {self.pending_path.name} (cut short by a kill during an append?)"
                _append_line(self.rejected_path, json.dumps({"line": number, "raw": text, "error": why}).encode())
            if partial or any(r["rid"] in done for r in records):
                _write_lines(self.pending_path, [json.dumps(r, default=str) for r in records if r["rid"] not in done])
        for record in records:
            if record["rid"] in done:
                self.drop_blob(record)
        return partial

    def reject(self, record: dict[str, Any], error: str) -> None:
        with self.lock:
            _append_line(self.rejected_path, json.dumps({**record, "error": error}, default=str).encode())

    def rejected_count(self) -> int:
        with self.lock:
            return sum(map(len, _read_jsonl(self.rejected_path)))

    def run_ids(self) -> dict[str, str]:
        if not self.map_path.exists():
            return {}
        fix = f"it maps buffered runs to MLflow run ids: restore it, or delete it only if {self.pending_path} is gone"
        try:
            ids = json.loads(self.map_path.read_text())
        except ValueError as err:  # written atomically, so only a hand edit gets here
            raise ValueError(f"{self.map_path} is not valid JSON ({err}); {fix}") from err
        if not (isinstance(ids, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in ids.items())):
            raise ValueError(f"{self.map_path} is not a mapping of run keys to run ids "
                             f"(a {type(ids).__name__}); {fix}")
        return ids

    def remember(self, key: str, run_id: str) -> None:
        with self.lock:
            _write_lines(self.map_path, [json.dumps({**self.run_ids(), key: run_id}, indent=1)])

    def sendable(self, record: dict[str, Any]) -> dict[str, Any]:
        """`record` as a flush sends it: an artifacts record from `<root>/blobs/<rid>`, the buffer's own copy,
        whatever path the record names; without that copy, BadRecord: set aside, nothing uploaded or deleted."""
        if record.get("op") != "artifacts":
            return record
        blob = self.root / "blobs" / str(record.get("rid"))
        if record.get("blob") is not True or not _RID.fullmatch(str(record.get("rid"))) or not blob.is_dir():
            raise BadRecord(f"a buffered artifacts record is sent only from this buffer's own copy "
                            f"({self.root / 'blobs'}/<rid>), and there is none for it: {record.get('local_path')} "
                            f"was neither uploaded nor deleted. To upload a folder, log it from a run.")
        return {**record, "local_path": str(blob)}

    def drop_blob(self, record: dict[str, Any]) -> None:
        """Removes the copy of a sent (or refused) record; never any other folder."""
        if record.get("op") == "artifacts" and _RID.fullmatch(str(record.get("rid"))):
            shutil.rmtree(self.root / "blobs" / record["rid"], ignore_errors=True)
