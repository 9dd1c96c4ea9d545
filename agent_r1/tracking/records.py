"""What a tracking record may hold, and which failures to send one are the network's.

A record is checked whole before anything is sent or buffered: its op, the type of every field, and
that all its text is valid Unicode (Python's JSON reader turns `"\\udcff"` into a lone surrogate, which
no store can encode). A record that fails is a BadRecord: set aside with the reason, never retried.

Sending can fail for two kinds of reason. The network (a refused or reset connection, a timeout, a
locked or unreachable database, a server answering 5xx) may heal, so the record waits in the buffer
and the queue waits with it. Anything else (MLflow refusing the record, the client failing to encode
or read it) never heals, so the record is set aside and the queue goes on: a record that is not
known to be the network's is never allowed to hold up the records behind it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# MLflow error codes that mean "MLflow answered and refused this record": retrying cannot help.
REJECTED_CODES = {"INVALID_PARAMETER_VALUE", "BAD_REQUEST", "RESOURCE_ALREADY_EXISTS", "INVALID_STATE",
                  "RESOURCE_DOES_NOT_EXIST", "PERMISSION_DENIED", "UNAUTHENTICATED", "MALFORMED_REQUEST"}
# the fields each op needs; a record without them is refused before anything is sent
REQUIRED_FIELDS = {
    "create_run": ("key", "experiment", "time_ms"), "params": ("key", "params"), "tags": ("key", "tags"),
    "metrics": ("key", "metrics", "step", "time_ms"), "table": ("key", "columns", "artifact_file"),
    "artifacts": ("key", "local_path"), "end": ("key", "status", "time_ms"),
    "trace": ("key", "experiment", "trace_key", "root"),
}
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


class BadRecord(Exception):
    """A record that can never be sent (malformed, its run refused, its artifact copy gone)."""


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _scalar_map(v: Any) -> bool:  # params, tags: name -> a value sent as its text
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, (str, int, float, bool)) for k, x in v.items())


def _number_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, (int, float)) and not isinstance(x, bool)
                                       for k, x in v.items())


def _columns(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, list) for k, x in v.items())


def _relative_files(v: Any) -> bool:  # an artifacts record's own list of the folder's files to send
    return isinstance(v, list) and all(isinstance(f, str) and f and not f.startswith("/")
                                       and ".." not in f.split("/") for f in v)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


# field -> (what it must be, the check); a field absent from a record is not checked here
FIELD_SHAPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "key": ("a non-empty string", lambda v: isinstance(v, str) and bool(v)),
    "experiment": ("a non-empty string", lambda v: isinstance(v, str) and bool(v)),
    "name": ("a string or null", _optional(_text)),
    "parent_key": ("a string or null", _optional(_text)),
    "time_ms": ("an integer", _int),
    "step": ("an integer", _int),
    "params": ("a mapping of names to values", _scalar_map),
    "tags": ("a mapping of names to values", lambda v: v is None or _scalar_map(v)),
    "metrics": ("a mapping of names to numbers", _number_map),
    "columns": ("a mapping of column names to lists", _columns),
    "artifact_file": ("a string", _text),
    "local_path": ("a string", _text),
    "artifact_path": ("a string or null", _optional(_text)),
    "file_name": ("a string or null", _optional(_text)),
    "files": ("a list of relative file paths or null", _optional(_relative_files)),
    "status": (f"one of {', '.join(RUN_STATUSES)}", lambda v: v in RUN_STATUSES),
    "trace_key": ("a string", _text),
    "root": ("a span tree (a mapping)", lambda v: isinstance(v, dict)),
}


def check_record(record: Any) -> None:
    """Raises BadRecord naming what is wrong with `record` (see the module doc)."""
    if not isinstance(record, dict):
        raise BadRecord(f"a record must be a JSON object, got {type(record).__name__}")
    op = record.get("op")
    if not isinstance(op, str) or op not in REQUIRED_FIELDS:
        raise BadRecord(f"unknown tracking record op {str(op)[:40]!r} (known: {', '.join(REQUIRED_FIELDS)})")
    missing = [f for f in REQUIRED_FIELDS[op] if f not in record]
    if missing:
        raise BadRecord(f"a {op!r} record lacks {', '.join(missing)}")
    if not isinstance(record["key"], str) or not record["key"]:
        raise BadRecord(f"a {op!r} record has no run key")
    for name, value in record.items():
        what, ok = FIELD_SHAPES.get(name, ("", None))
        if ok is not None and not ok(value):
            raise BadRecord(f"a {op!r} record's {name!r} must be {what}, got {type(value).__name__} "
                            f"{str(value)[:60]!r}")
    try:
        json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError as err:
        raise BadRecord(f"a {op!r} record holds text that is not valid Unicode (a lone surrogate such as "
                        f"{err.object[err.start:err.end]!r}; {err.reason}): no store can encode it") from None
    except (TypeError, ValueError, RecursionError) as err:
        raise BadRecord(f"a {op!r} record is not JSON ({type(err).__name__}: {str(err)[:120]})") from None


def is_network(err: BaseException) -> bool:
    """The failure may heal by itself (see the module doc): the record waits, and the queue with it."""
    if isinstance(err, BadRecord):
        return False
    code = getattr(err, "error_code", None)
    if isinstance(code, str):  # MLflow answered: refused (4xx-style) or failed on its side (5xx)
        return code not in REJECTED_CODES
    if isinstance(err, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return False  # a path that will not appear by waiting
    if isinstance(err, (OSError, TimeoutError)):  # refused, reset, timed out (requests' errors are OSErrors)
        return True
    # a database the store cannot reach or that is locked (SQLAlchemy's OperationalError and pool timeouts)
    return type(err).__module__.startswith("sqlalchemy") and type(err).__name__ in (
        "OperationalError", "DisconnectionError", "TimeoutError", "InterfaceError")


def is_rejected(err: BaseException) -> bool:
    """Anything that is not the network: set aside with its reason, never retried."""
    return not is_network(err)
