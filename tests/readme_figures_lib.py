"""The machinery behind tests/readme_figures.py: the `Figure` entry, README's rounding, reading a
value from a result file (or computing it from the raw data there) and checking the page that quotes it
(README.md or a page under docs/, the entry's `doc`) holds it.

Kept apart from the registry so that the registry stays a plain list of entries; how to add one is at
the top of tests/readme_figures.py.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
README = REPO / "README.md"
DOCS = REPO / "docs"
MARK, GAP = "@@", "~"

Fmt = Callable[[Any], str]
Getter = Callable[[Any], Any]


# --- rounding as README does it -------------------------------------------------------------------

def _s(x: float, d: int, comma: bool = False, sign: bool = False) -> str:
    # repr() gives the shortest decimal text of the float, the digits a person reads in the JSON
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP)
    out = f"{q:,f}" if comma else f"{q:f}"
    return "+" + out if sign and q > 0 else out


def num(d: int = 0, comma: bool = False, sign: bool = False, scale: float = 1.0) -> Fmt:
    return lambda v: _s(v * scale, d, comma, sign)


def seq(d: int | tuple[int, ...], sep: str = ", ", comma: bool = False, sign: bool = False,
        scale: float = 1.0) -> Fmt:
    """A list of values joined by `sep`; `d` per item when README rounds them differently."""
    def fmt(v: Any) -> str:
        ds = d if isinstance(d, tuple) else (d,) * len(v)
        return sep.join(_s(x * scale, k, comma, sign) for x, k in zip(v, ds, strict=True))
    return fmt


def span(d: int = 0, sep: str = "-", scale: float = 1.0) -> Fmt:
    """min-max of a list, as README's "232-250 s"."""
    return lambda v: f"{_s(min(v) * scale, d)}{sep}{_s(max(v) * scale, d)}"


def ci(d: int = 1, sign: bool = False) -> Fmt:
    """An interval dict {mean, low, high} as "82.7 [72.7, 93.7]"."""
    return lambda v: f"{_s(v['mean'], d, sign=sign)} [{_s(v['low'], d)}, {_s(v['high'], d)}]"


def med(d: int = 2) -> Fmt:
    """A repeats dict {median, min, max} as "1.10 (0.97-1.17)"."""
    return lambda v: f"{_s(v['median'], d)} ({_s(v['min'], d)}-{_s(v['max'], d)})"


# --- the entry and its check ------------------------------------------------------------------------

@lru_cache(maxsize=None)
def load(file: str) -> Any:
    # one parse per file for the whole registry (learning.json alone backs some 40 figures)
    return json.loads((RESULTS / file).read_text())


def dig(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


@dataclass(frozen=True)
class Figure:
    name: str  # the README figure, in words; unique (it is the test id)
    file: str  # result file under benchmarks/results/
    path: str  # JSON path in it, or (with `get`) what the figure is computed from
    fmt: Fmt  # the value as README writes it
    context: str  # README text around it: `@@` the figure, `~` a short gap
    get: Getter | None = None  # computes the value from the loaded file, for derived figures
    after: str = ""  # page text the match must follow
    doc: str = "README.md"  # the page that quotes it, relative to the repository root (README.md, docs/x.md)

    def value(self) -> Any:
        doc = load(self.file)
        return self.get(doc) if self.get else dig(doc, self.path)


def at(doc: str, figures: list[Figure]) -> list[Figure]:
    """The same entries, quoted on page `doc` (e.g. "docs/results.md") instead of README."""
    return [replace(f, doc=doc) for f in figures]


@lru_cache(maxsize=None)
def page(doc: str) -> str:
    """The text of a page the figures are quoted on (README.md, docs/*.md)."""
    return (REPO / doc).read_text()


def normalise(text: str) -> str:
    """README as the contexts are written: one space for any whitespace run, no bold marks (README wraps
    prose at ~100 columns and bolds headline numbers; neither is part of the figure)."""
    return re.sub(r"\s+", " ", text.replace("**", ""))


def context_regex(context: str, figure: str | None) -> re.Pattern[str]:
    """The context as a regex: the formatted figure at `@@` (or, with None, whatever README has there)."""
    at = re.escape(figure) if figure is not None else r"(?P<found>.{1,120}?)"
    pieces = [r"[^|]{0,160}?".join(re.escape(s) for s in part.split(GAP)) for part in context.split(MARK)]
    return re.compile(at.join(pieces))


def check(fig: Figure, readme: str) -> str | None:
    """None when the page text `readme` (the text of `fig.doc`) holds the figure in its context, else a
    message naming page, figure, file and value."""
    where = f"benchmarks/results/{fig.file} ({fig.path})"
    try:
        value = fig.value()
        shown = fig.fmt(value)
    except (OSError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        return f"{fig.doc} figure {fig.name!r}: cannot read it from {where}: {exc!r}"
    text = normalise(readme)
    if fig.after:
        start = text.find(fig.after)
        if start < 0:
            return f"{fig.doc} figure {fig.name!r}: {fig.doc} no longer has {fig.after!r} to find it after"
        text = text[start:]
    if context_regex(fig.context, shown).search(text):
        return None
    found = context_regex(fig.context, None).search(text)
    readme_has = f"{found.group('found')!r}" if found else "no text matching the context"
    return (f"{fig.doc} figure {fig.name!r}: {where} holds {str(value)[:200]}, which {fig.doc} would write as "
            f"{shown!r}; {fig.doc} has {readme_has} at {fig.context!r}")


# --- figures computed from a file's raw data -------------------------------------------------------
# README's intervals and differences are bootstrapped by agent_r1.evaluation.stats (seeded, so exact);
# they are recomputed here from the per-question scores in the JSON with the same function and defaults
# the benchmarks use, rather than read from a rendered table, so the JSON stays the one source. The
# project imports sit inside the getters to keep collecting the tests cheap.

def _learning_run(doc: Any, seed: str, variant: str) -> Any:
    per = doc["per_seed"][seed]
    return per["warm_start"] if variant == "warm_start" else per["runs"][variant]


def learning_seeds(variant: str, key: str) -> Getter:
    """One value per seed of a learning.py result file that has run, in seed order, e.g. ("grpo",
    "greedy.em"); "warm_start" for the warm start. A file whose later seeds were stopped holds fewer."""
    return lambda doc: [dig(_learning_run(doc, str(s), variant), key) for s in doc["seeds"]
                        if str(s) in doc["per_seed"]]


def learning_diff(a: str, b: str) -> Getter:
    """Paired bootstrap of a - b over learning.json's seeds and questions (the README's differences),
    with agent_r1.evaluation.stats, as paper_render does for the paper table."""
    def get(doc: Any) -> dict[str, float]:
        from agent_r1.evaluation.stats import paired_difference_ci
        rows = [[[100.0 * x for x in _learning_run(doc, str(s), v)["greedy"]["em_per_question"]]
                 for s in doc["seeds"]] for v in (a, b)]
        return paired_difference_ci(*rows).to_dict()
    return get


PAPER_DS = "synthetic_test"


def _paper_rows(doc: Any, kind: str, name: str) -> list[list[float]]:
    return [[100.0 * x for x in doc["per_seed"][str(s)][kind][name]["em_per_question"][PAPER_DS]]
            for s in doc["seeds"]]


def paper_cell(kind: str, name: str) -> Getter:
    def get(doc: Any) -> dict[str, float]:
        from agent_r1.evaluation.stats import mean_ci
        return mean_ci(_paper_rows(doc, kind, name)).to_dict()
    return get


def paper_diff(a: str, b: str, kind_b: str = "methods") -> Getter:
    def get(doc: Any) -> dict[str, float]:
        from agent_r1.evaluation.stats import paired_difference_ci
        return paired_difference_ci(_paper_rows(doc, "methods", a), _paper_rows(doc, kind_b, b)).to_dict()
    return get


def paper_seeds(kind: str, name: str, key: str = "em") -> Getter:
    return lambda doc: [doc["per_seed"][str(s)][kind][name]["metrics"][PAPER_DS][key] for s in doc["seeds"]]


def gpu_learner_gib(model: str, preset: str) -> Getter:
    """[full fine-tuning, LoRA] learner GiB as benchmarks/memory_table.py computes them from memory.json."""
    def get(doc: Any) -> list[float]:
        mt, cfg = _memory_table(), _paper_config(preset)
        head = mt.head_bytes(doc["results"])
        return [mt.learner_gib(mt.QWEN25[model], cfg, lora, doc["derived"], head) for lora in (False, True)]
    return get


@lru_cache(maxsize=None)
def _memory_table() -> Any:
    from benchmarks import memory_table

    return memory_table


@lru_cache(maxsize=None)
def _paper_config(preset: str) -> Any:
    from agent_r1.config import load_config
    return load_config(REPO / "configs" / "paper" / f"{preset}.yaml")


def async_waits(doc: Any, modes: tuple[str, ...]) -> list[float]:
    return [w for m in modes for run in doc["async_speed"]["runs"][m] for w in run["rollout_wait_s"]]


def profile_row(doc: Any, *keys: str) -> list[float]:
    """(seconds, share %) of the README row that sums these profile.json sections."""
    rows = [s for s in doc["sections"] if s["key"] in keys]
    assert len(rows) == len(keys), keys
    return [sum(s["seconds"]["median"] for s in rows), 100 * sum(s["share"] for s in rows)]


def median(xs: list[float]) -> float:
    return statistics.median(xs)
