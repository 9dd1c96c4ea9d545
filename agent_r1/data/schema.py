"""The one sample schema every loader produces and every consumer reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class QASample:
    """A question with its accepted answers.

    `supporting_titles` names the corpus documents that support the answer (used for
    retrieval recall and the retrieval process reward); `plan` is optional scripted-agent
    guidance (a list of tool inputs, or {"name", "arguments"} calls) for demonstrations; `env`
    is the sample's own env config (tools, budgets, reward settings; see envs/tool_env.py
    `sample_env_config`), empty for the run's defaults.
    """

    id: str
    question: str
    answers: list[str]
    supporting_titles: list[str] = field(default_factory=list)
    type: str = ""
    source: str = ""
    plan: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        if not row["env"]:  # rows without their own env config stay as they were
            del row["env"]
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "QASample":
        known = {k: row[k] for k in cls.__dataclass_fields__ if k in row}
        missing = [k for k in ("id", "question", "answers") if k not in row]
        if missing:
            raise ValueError(f"sample is missing required field(s) {missing}: {str(row)[:200]}")
        answers = known["answers"]
        if isinstance(answers, str):
            known["answers"] = [answers]
        return cls(**known)


@dataclass
class Document:
    """A corpus entry: stable `id`, `title`, `text`."""

    id: str
    title: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
