"""The one logging interface for metrics, and its local record: a run folder's metrics.jsonl (what DVC
plots and a resume trims); MLflow plugs in behind the same call (run.py's MlflowSink)."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


class MetricsSink(Protocol):
    """`log` is required; a sink may also define `log_trajectories(step, trajectories, tokenizer)`, and
    `folders()`: where it writes, so a full disk in a write that names no file names them."""

    def log(self, step: int, metrics: dict[str, float]) -> None: ...


class JsonlMetrics:
    """Appends `{"step": N, ...}` lines.

    On resume (`resume_from_step`), lines at or after that step are dropped so the file never holds
    a step twice (those steps are run again); the rewrite is atomic. Without it, an existing
    history is never deleted: it is renamed to `metrics.<UTC time>.jsonl` next to it, with a warning.
    """

    def __init__(self, path: str | Path, resume_from_step: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            return
        if resume_from_step is not None:
            kept = [r for r in parse_metrics(self.path, drop_torn_tail=True) if r.get("step", -1) < resume_from_step]
            _replace_durably(self.path, "".join(json.dumps(r) + "\n" for r in kept))
        elif self.path.stat().st_size > 0:
            aside = _aside_name(self.path)
            os.replace(self.path, aside)
            log.warning("%s held a previous run's metrics; a new run starts, so they were moved to %s",
                        self.path, aside)

    def folders(self) -> list[Path]:
        return [self.path.parent]

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        try:
            with self.path.open("a") as f:
                f.write(json.dumps({"step": step, **clean}) + "\n")
        except OSError as err:
            # a failed write or flush names no file: name it, so a full disk's error says which one. A
            # torn line left behind is dropped when the run resumes (parse_metrics)
            if err.filename is None:
                raise OSError(err.errno, err.strerror, str(self.path)) from err
            raise


def parse_metrics(path: Path, drop_torn_tail: bool = False) -> list[dict[str, Any]]:
    """Every row of a metrics file. A last line without its newline that does not parse is an append
    cut short (a kill, or a writer still at it): skipped (with a warning if `drop_torn_tail`).
    Any other unreadable line is an error naming file and line."""
    text = path.read_text()
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as e:
            if i == len(lines) and not text.endswith("\n"):
                if drop_torn_tail:
                    log.warning("%s:%d is a partial line (the writer was stopped mid-append); dropped", path, i)
                break
            raise ValueError(f"{path}:{i} is not a JSON metrics row ({e}); fix or remove that line") from None
    return rows


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    return parse_metrics(p) if p.exists() else []


def _aside_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside, n = path.with_name(f"{path.stem}.{stamp}{path.suffix}"), 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.stem}.{stamp}_{n}{path.suffix}")
    return aside


def _replace_durably(path: Path, text: str) -> None:
    """A kill mid-rewrite must leave the old file whole, never a half-written history."""
    tmp = path.with_name(f".{path.name}.tmp_{os.getpid()}")
    try:
        with tmp.open("w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # the old file is whole; a partial copy would only take space
        raise
