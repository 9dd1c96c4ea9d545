"""One logging interface for metrics: a JSONL file here; MLflow plugs in behind the same call."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol


class MetricsSink(Protocol):
    """`log` is required; a sink may also define `log_trajectories(step, trajectories, tokenizer)`."""

    def log(self, step: int, metrics: dict[str, float]) -> None: ...


class JsonlMetrics:
    """Appends `{"step": N, ...}` lines; on resume, lines at or after the resume step are dropped
    so the file never holds a step twice."""

    def __init__(self, path: str | Path, resume_from_step: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_from_step is not None and self.path.exists():
            kept = [ln for ln in self.path.read_text().splitlines()
                    if ln.strip() and json.loads(ln).get("step", -1) < resume_from_step]
            self.path.write_text("".join(ln + "\n" for ln in kept))
        elif resume_from_step is None and self.path.exists():
            self.path.unlink()

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **clean}) + "\n")


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []
