"""JSON/JSONL reading and writing with errors that name the file, the line and the fix.

Why a module of its own: every loader, the corpus builder and the CLI read user-supplied
files; a bad row deep in a 100k-line file must point at `file:line`, not at a JSON decoder
offset, and a half-written output must never be left behind (writes go through a temp file).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Record:
    """One parsed row and the 1-based line it starts on (for error messages)."""

    line: int
    value: Any


class RowError(ValueError):
    """A row that could not be read; `line` is 1-based. Loaders may skip these (skip_bad)."""

    def __init__(self, path: Path, line: int, reason: str, fix: str = "") -> None:
        self.path = Path(path)
        self.line = line
        self.reason = reason
        msg = f"{path}:{line}: {reason}"
        if fix:
            msg += f" (fix: {fix})"
        super().__init__(msg)


def _require_file(path: Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (check the path)")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, expected a .json or .jsonl file")
    return path


def _decode(path: Path, raw: bytes, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RowError(
            path, line, f"not valid UTF-8 ({err.reason} at byte {err.start} of the line)",
            "re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`",
        ) from None


def iter_records(path: str | os.PathLike[str], *, skip_bad: bool = False,
                 bad: list[RowError] | None = None) -> Iterator[Record]:
    """Yield the rows of a JSONL file or a JSON array file (detected by a leading `[`).

    Blank lines are ignored. With `skip_bad`, undecodable or malformed JSONL lines are
    appended to `bad` instead of raising. An empty file raises: a silent empty dataset
    would otherwise surface much later as a confusing zero-sample training run.
    """
    path = _require_file(Path(path))
    data = path.read_bytes()
    if not data.strip():
        raise ValueError(f"{path}: file is empty (expected JSON lines or a JSON array of objects)")
    if data.lstrip()[:1] == b"[":
        escapes = "\\ud" if b"\\ud" in data.lower() else ""  # no escape in the file: no row is walked
        for rec in _iter_array(path, data):
            try:
                yield Record(rec.line, _valid_text(path, rec.line, escapes, rec.value))
            except RowError as err:
                if not skip_bad:
                    raise
                if bad is not None:
                    bad.append(err)
        return
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = _decode(path, raw, line_no)
            value = _parse_line(path, line_no, text)
        except RowError as err:
            if not skip_bad:
                raise
            if bad is not None:
                bad.append(err)
            continue
        yield Record(line_no, value)


def _parse_line(path: Path, line: int, text: str) -> Any:
    """One JSONL row. Besides syntax errors, a row nested ~1,000+ levels deep (RecursionError) or with
    an integer over Python's 4,300-digit limit (ValueError) is a bad row, never a crash."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise RowError(path, line, f"malformed JSON ({err.msg} at column {err.colno})",
                       "each line must be one complete JSON object") from None
    except RecursionError:
        raise RowError(path, line, "JSON nested too deeply to read", "flatten the row") from None
    except ValueError as err:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise RowError(path, line, f"unreadable JSON value ({str(err)[:100]})", "fix the value") from None
    return _valid_text(path, line, text, value)


def _valid_text(path: Path, line: int, text: str, value: Any) -> Any:
    """`value` when every string in it is valid Unicode. The file is valid UTF-8, but JSON escapes can
    still spell a lone surrogate (`"\\udcff"`), which Python's reader accepts and no tokenizer or store
    can encode: a bad row, named by its field. (Only a text holding such an escape is walked.)"""
    if "\\ud" not in text.lower():
        return value
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in item.items())
            stack.extend((f"{where} (a key)", k) for k in item)
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                raise RowError(path, line, f"field {where or 'value'!r} holds a lone surrogate "
                               f"({item[err.start:err.end]!r}), which is not text any tokenizer can encode",
                               "remove the \\udXXX escape, or write the character it was meant to be") from None
    return value


def _iter_array(path: Path, data: bytes) -> Iterator[Record]:
    """A JSON array file (the official HotpotQA/2Wiki/MuSiQue releases): parsed whole,
    since a syntax error anywhere invalidates it; records carry their array index + 1."""
    # Decode line by line first so a bad byte is reported with its line number.
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        _decode(path, raw, line_no)
    text = data.decode("utf-8")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise RowError(path, err.lineno, f"malformed JSON array ({err.msg} at column {err.colno})",
                       "fix the JSON syntax or convert the file to JSON lines") from None
    except (RecursionError, ValueError) as err:  # too deep, or a 4,300+ digit integer: the array is unreadable
        raise ValueError(f"{path}: unreadable JSON array ({type(err).__name__}: {str(err)[:100]}); "
                         "convert the file to JSON lines so one bad row can be skipped") from None
    if not isinstance(value, list):
        raise ValueError(f"{path}: expected a JSON array of objects, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{path}: the JSON array is empty")
    for i, item in enumerate(value, start=1):
        yield Record(i, item)


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> int:
    """Write rows (dicts, or objects with `to_dict()`) as UTF-8 JSON lines, atomically.

    Returns the number of rows. The temp-file + rename means a crash mid-write leaves the
    previous file intact instead of a truncated one that later fails to parse.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                if hasattr(row, "to_dict"):
                    row = row.to_dict()
                fh.write(json.dumps(row, ensure_ascii=False))
                fh.write("\n")
                n += 1
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def write_json(path: str | os.PathLike[str], value: Any) -> None:
    """Write one JSON document atomically (pretty-printed: these are small manifests)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def replace_dir(built: str | os.PathLike[str], dest: str | os.PathLike[str], key: str = "",
                fix: str = "", legacy: tuple[str, ...] = ()) -> None:
    """Renames the finished folder `built` (the caller's own temporary folder) to `dest`. An older
    `dest` is moved aside first and removed only once the new one is in, so a reader never finds half
    a folder, one that has files open keeps reading them whole, and `dest` is missing only between
    the two renames.

    Only a folder agent-r1 made is ever replaced (agent_r1/data/owned.py): `dest` must be missing,
    empty, marked, or hold one of the `legacy` files its older versions wrote; otherwise `built` is
    removed and ForeignFolderError names `dest`, the setting `key` and the `fix`. What is put in
    place carries the marker, so the next replacement knows it."""
    from agent_r1.data.owned import check_replaceable, mark_made

    built, dest = Path(built), Path(dest)
    try:
        check_replaceable(dest, key or "the folder", fix, legacy)
    except Exception:
        shutil.rmtree(built, ignore_errors=True)
        raise
    mark_made(built, key or "agent-r1")
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        os.replace(dest, old)
    os.replace(built, dest)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def built_aside(dest: str | os.PathLike[str], key: str, legacy: tuple[str, ...] = ()) -> Iterator[Path]:
    """A new folder beside `dest`, this process's own (two builders never share one), to build into: put
    in place with `replace_dir` when the block ends, removed when it raises (`dest` stays as it was)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, dest, key, "", legacy)
