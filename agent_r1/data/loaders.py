"""Loaders for multi-hop QA datasets into the shared `QASample` schema.

Each dataset has a row converter; one driver (`_load`) handles the file format (JSONL or a
JSON array), bad rows (`skip_bad`), and duplicate ids, so every loader behaves the same way
on bad input. Accepted formats:

- HotpotQA (official): `_id`, `question`, `answer`, `type`, `level`, `supporting_facts`,
  `context`.
- 2WikiMultihopQA: official (`_id`, `question`, `answer`, `type`, `supporting_facts`,
  `context`) or questions-only (`question`, `answer` as a string or a list of aliases).
- MuSiQue: official (`id`, `question`, `answer`, `answer_aliases`, `paragraphs` with
  `is_supporting`) or questions-only (`question`, `answer` string or list).
- Our own `questions.jsonl`: one `QASample.to_dict()` per line (`load_questions_jsonl`).

Every loader caps the question at `MAX_QUESTION_CHARS` (a 1 MB question took 1.1 s and 579 MB to
tokenise before any token budget applied), and with `skip_bad` skips every bad row, whatever is wrong
with it, recording `file:line` and the reason. Our own rows' `env` settings are typed and
range-checked here, at load, with the run's config schema (envs/tool_env.py `check_sample_env`).

Rows without an id get a content-derived one (`<source>-<sha1(question)[:12]>`): stable
across runs and across re-orderings of the file, so cached rollouts keyed by id stay valid.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_r1.data.io import RowError, iter_records
from agent_r1.data.schema import QASample
from agent_r1.registry import NoTraits, Registry

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: Longest question a loader accepts (characters); pass `max_question_chars=` to a loader to change it.
MAX_QUESTION_CHARS = 4096


@dataclass
class LoadReport:
    """What a load did: pass one to a loader to learn how many rows `skip_bad` dropped."""

    path: Path | None = None
    n_loaded: int = 0
    skipped: list[RowError] = field(default_factory=list)

    @property
    def n_skipped(self) -> int:
        return len(self.skipped)


class _FieldError(ValueError):
    """A row-level problem; the driver adds file and line."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


# ---------------------------------------------------------------------------- field helpers

def _field(row: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    alts = " or ".join(repr(n) for n in names)
    raise _FieldError(f"missing field {alts}", f"add {names[0]!r} to every row")


def _text(row: dict[str, Any], *names: str) -> str:
    value = _field(row, *names)
    if not isinstance(value, str) or not value.strip():
        raise _FieldError(f"field {names[0]!r} must be a non-empty string, got {value!r:.60}",
                          f"give {names[0]!r} a non-empty string")
    return value.strip()


def _answers(value: Any, name: str = "answer") -> list[str]:
    """An answer given as a string or a list of aliases -> non-empty list of strings."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise _FieldError(f"field {name!r} must be a string or a list of strings",
                          f"write {name!r} as \"text\" or [\"alias\", ...]")
    out = _dedup(a.strip() for a in value if a.strip())
    if not out:
        raise _FieldError(f"field {name!r} is empty", f"give at least one non-empty {name!r}")
    return out


def _dedup(items: Any) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _supporting_titles(row: dict[str, Any]) -> list[str]:
    """Titles from `supporting_facts` [[title, sent_id], ...], deduplicated in order."""
    facts = row.get("supporting_facts") or []
    if not isinstance(facts, list):
        raise _FieldError("field 'supporting_facts' must be a list of [title, sent_id]",
                          "write supporting_facts as [[\"Title\", 0], ...]")
    titles = []
    for fact in facts:
        if not isinstance(fact, (list, tuple)) or not fact or not isinstance(fact[0], str):
            raise _FieldError(f"bad supporting fact {fact!r:.60}", "each fact is [\"Title\", sent_id]")
        titles.append(fact[0])
    return _dedup(titles)


def _derived_id(source: str, question: str) -> str:
    return f"{source}-{hashlib.sha1(question.encode('utf-8')).hexdigest()[:12]}"


def _id(row: dict[str, Any], source: str, question: str) -> str:
    for name in ("_id", "id"):
        value = row.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    return _derived_id(source, question)


# ---------------------------------------------------------------------------- converters

def _hotpotqa_row(row: dict[str, Any]) -> QASample:
    question = _text(row, "question")
    qid = _text(row, "_id", "id")  # the official release always has one
    meta: dict[str, Any] = {}
    if "level" in row:
        meta["level"] = row["level"]
    return QASample(
        id=qid, question=question, answers=_answers(_field(row, "answer", "answers")),
        supporting_titles=_supporting_titles(row), type=str(row.get("type") or ""),
        source="hotpotqa", meta=meta,
    )


def _2wiki_row(row: dict[str, Any]) -> QASample:
    question = _text(row, "question")
    return QASample(
        id=_id(row, "2wiki", question), question=question,
        answers=_answers(_field(row, "answer", "answers")),
        supporting_titles=_supporting_titles(row), type=str(row.get("type") or ""),
        source="2wiki",
    )


def _musique_row(row: dict[str, Any]) -> QASample:
    question = _text(row, "question")
    answers = _answers(_field(row, "answer", "answers"))
    if row.get("answer_aliases"):
        answers = _dedup(answers + _answers(row["answer_aliases"], "answer_aliases"))
    qid = _id(row, "musique", question)
    paragraphs = row.get("paragraphs") or []
    titles = _dedup(p.get("title", "") for p in paragraphs
                    if isinstance(p, dict) and p.get("is_supporting") and p.get("title"))
    meta = {"answerable": row["answerable"]} if "answerable" in row else {}
    # Official ids look like "2hop__13548_13529": the prefix is the hop structure.
    qtype = qid.split("__", 1)[0] if "__" in qid else ""
    return QASample(id=qid, question=question, answers=answers, supporting_titles=titles,
                    type=qtype, source="musique", meta=meta)


def _bamboogle_row(row: dict[str, Any]) -> QASample:
    question = _text(row, "question")
    return QASample(id=_id(row, "bamboogle", question), question=question,
                    answers=_answers(_field(row, "answer", "answers")), source="bamboogle")


_OWN_TYPES = {"supporting_titles": list, "plan": list, "meta": dict, "env": dict, "type": str, "source": str}


#: Ceilings of a row's other fields (the question has MAX_QUESTION_CHARS): items in a list field, and
#: characters of any one text in it (an answer, a title, a plan step) or of `meta` as JSON.
MAX_LIST_ITEMS = 1000
MAX_FIELD_CHARS = 4096
MAX_META_CHARS = 65_536


def _check_sizes(row: dict[str, Any]) -> None:
    for name in ("answers", "supporting_titles", "plan"):
        items = row.get(name)
        items = [items] if isinstance(items, str) else items if isinstance(items, list) else []
        if len(items) > MAX_LIST_ITEMS:
            raise _FieldError(f"field {name!r} has {len(items):,} items, over the ceiling of {MAX_LIST_ITEMS:,}",
                              f"keep {name!r} under {MAX_LIST_ITEMS:,} items")
        longest = max((len(str(t)) for t in items), default=0)
        if longest > MAX_FIELD_CHARS:
            raise _FieldError(f"an item of {name!r} is {longest:,} characters, over the ceiling of {MAX_FIELD_CHARS:,}",
                              f"shorten it to {MAX_FIELD_CHARS:,} characters")
    for name in ("id", "type", "source"):
        if isinstance(row.get(name), str) and len(row[name]) > MAX_FIELD_CHARS:
            raise _FieldError(f"field {name!r} is over {MAX_FIELD_CHARS:,} characters", f"shorten {name!r}")
    if isinstance(row.get("meta"), dict) and len(json.dumps(row["meta"], default=str)) > MAX_META_CHARS:
        raise _FieldError(f"field 'meta' is over {MAX_META_CHARS:,} characters as JSON", "keep meta small")


def _own_row(row: dict[str, Any], check_env: Callable[[dict[str, Any]], Any] | None = None) -> QASample:
    """A `QASample.to_dict()` row; its own `env` mapping is handed to `check_env` (the env schema's
    check, agent_r1/envs/samples.py: a loader knows no env), whose ValueError names the row."""
    for name in ("id", "question", "answers"):
        _field(row, name)
    _text(row, "question")
    for name, kind in _OWN_TYPES.items():
        if name in row and not isinstance(row[name], kind):
            what = {dict: "a JSON object (mapping)", list: "a JSON array", str: "a string"}[kind]
            raise _FieldError(f"field {name!r} must be {what}, got {type(row[name]).__name__}", f"write {name!r} as {what}")
    for name in ("supporting_titles", "answers"):
        items = row.get(name)
        if isinstance(items, list) and not all(isinstance(t, str) for t in items):
            raise _FieldError(f"field {name!r} must be a list of strings", f"write {name!r} as [\"text\", ...]")
    _check_sizes(row)
    sample = QASample.from_dict(row)
    sample.answers = _answers(sample.answers, "answers")
    if sample.env and check_env is not None:
        try:
            check_env(sample.env)
        except ValueError as err:
            raise _FieldError(str(err), "fix the row's env value, or drop it to use the run's config") from None
    return sample


# ---------------------------------------------------------------------------- driver

def _load(path: PathLike, convert: Callable[[dict[str, Any]], QASample], skip_bad: bool = False,
          report: LoadReport | None = None, max_question_chars: int = MAX_QUESTION_CHARS) -> list[QASample]:
    path = Path(path)
    report = report if report is not None else LoadReport()
    report.path = path
    samples: list[QASample] = []
    first_line: dict[str, int] = {}
    for rec in iter_records(path, skip_bad=skip_bad, bad=report.skipped):
        try:
            if not isinstance(rec.value, dict):
                raise _FieldError(f"expected a JSON object, got {type(rec.value).__name__}",
                                  "each row must be a {...} object")
            sample = convert(rec.value)
            if len(sample.question) > max_question_chars:
                raise _FieldError(f"question is {len(sample.question):,} characters, over the cap of "
                                  f"{max_question_chars:,} (loaders.MAX_QUESTION_CHARS)",
                                  "shorten the question, or pass max_question_chars= to the loader")
            if sample.id in first_line:
                raise _FieldError(f"duplicate id {sample.id!r} (first on line {first_line[sample.id]})",
                                  "ids must be unique: remove or rename the duplicate row")
        except Exception as exc:  # noqa: BLE001  (any bad row, RecursionError included, is that row's error)
            err = exc if isinstance(exc, _FieldError) else _FieldError(
                f"unreadable row ({type(exc).__name__}: {str(exc)[:120]})", "fix or remove the row")
            row_err = RowError(path, rec.line, err.reason, err.fix)
            if not skip_bad:
                raise row_err from None
            report.skipped.append(row_err)
            continue
        first_line[sample.id] = rec.line
        samples.append(sample)
    if report.skipped:
        log.warning("%s: skipped %d bad row(s); first: %s", path, report.n_skipped, report.skipped[0])
    if not samples:
        raise ValueError(f"{path}: no valid rows (skipped {report.n_skipped}); check the file format")
    report.n_loaded = len(samples)
    return samples


Loader = Callable[..., list[QASample]]  # (path, skip_bad=False, report=None, max_question_chars=...)

# HotpotQA (official fields; supporting_titles from supporting_facts, level in meta); 2WikiMultihopQA and
# MuSiQue, official or questions-only (answer string or alias list; MuSiQue's answer_aliases and
# paragraphs); Bamboogle questions (question + answer string or list)
load_hotpotqa: Loader = functools.partial(_load, convert=_hotpotqa_row)
load_2wiki: Loader = functools.partial(_load, convert=_2wiki_row)
load_musique: Loader = functools.partial(_load, convert=_musique_row)
load_bamboogle: Loader = functools.partial(_load, convert=_bamboogle_row)


def load_questions_jsonl(path: PathLike, skip_bad: bool = False, report: LoadReport | None = None,
                         max_question_chars: int = MAX_QUESTION_CHARS,
                         check_env: Callable[[dict[str, Any]], Any] | None = None) -> list[QASample]:
    """Our own questions.jsonl (`QASample.to_dict()` rows), as written by `agent-r1 prepare`.

    `check_env(row_env)` checks a row's own `env` settings, so a bad row fails here with its file:line:
    `agent_r1.envs.samples.load_questions` passes the env schema's check (with the run's env and
    reward, a row may tighten them, never loosen them). Without it rows' env settings are read as
    written (the env checks them when it is built)."""
    return _load(path, functools.partial(_own_row, check_env=check_env), skip_bad=skip_bad, report=report,
                 max_question_chars=max_question_chars)


#: Dataset name -> loader; `agent-r1 prepare <name>` and evaluation look names up here.
LOADERS: Registry[Loader, NoTraits] = Registry("dataset", where="agent_r1.data.loaders.LOADERS")
LOADERS.register("hotpotqa", load_hotpotqa)
LOADERS.register("2wiki", load_2wiki)
LOADERS.register("musique", load_musique)
LOADERS.register("bamboogle", load_bamboogle)
