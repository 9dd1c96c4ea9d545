"""Retrieval quality metrics over ranked hit lists.

Recall is measured on titles because that is what HotpotQA-style supervision names
(`supporting_titles`); agreement between backends is measured on document ids, which are
content hashes identical across backends (see agent_r1.data.corpus.doc_id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agent_r1.retrieval.base import Hit


@dataclass(frozen=True)
class RecallAtK:
    """`any`: share of questions with at least one supporting title in the top k;
    `all`: share with every supporting title there. `n` counts the questions scored
    (those with supporting titles); `n_skipped` those without any."""

    k: int
    any: float
    all: float
    n: int
    n_skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recall_at_k(results: Sequence[Sequence[Hit]], gold_titles: Sequence[Sequence[str]], k: int) -> RecallAtK:
    if len(results) != len(gold_titles):
        raise ValueError(f"{len(results)} result lists for {len(gold_titles)} questions")
    n = hit_any = hit_all = skipped = 0
    for hits, gold in zip(results, gold_titles):
        gold_set = set(gold)
        if not gold_set:
            skipped += 1
            continue
        found = {h.title for h in list(hits)[:k]} & gold_set
        n += 1
        hit_any += bool(found)
        hit_all += found == gold_set
    return RecallAtK(k=k, any=hit_any / n if n else 0.0, all=hit_all / n if n else 0.0, n=n, n_skipped=skipped)


@dataclass(frozen=True)
class Agreement:
    """Share of queries whose top-1 document is the same in both backends (`n` compared;
    queries where both return nothing are excluded, one empty side counts as disagreement)."""

    top1: float
    n: int
    n_agree: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def top1_agreement(a: Sequence[Sequence[Hit]], b: Sequence[Sequence[Hit]]) -> Agreement:
    if len(a) != len(b):
        raise ValueError(f"cannot compare {len(a)} result lists with {len(b)}")
    n = agree = 0
    for ha, hb in zip(a, b):
        if not ha and not hb:
            continue
        n += 1
        agree += bool(ha) and bool(hb) and ha[0].id == hb[0].id
    return Agreement(top1=agree / n if n else 0.0, n=n, n_agree=agree)
