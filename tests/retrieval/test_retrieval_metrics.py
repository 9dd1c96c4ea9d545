"""recall@k and top-1 agreement."""

from __future__ import annotations

import pytest

from agent_r1.retrieval.base import Hit
from agent_r1.retrieval.metrics import recall_at_k, top1_agreement


def h(doc: str) -> Hit:
    return Hit(id=doc, title=doc, text="", score=1.0)


def test_recall_any_all():
    results = [[h("A"), h("B"), h("C")], [h("A"), h("X")], [h("X")], [h("Q")]]
    gold = [["A", "C"], ["A", "B"], ["B"], []]
    r = recall_at_k(results, gold, k=2)
    assert (r.any, r.all, r.n, r.n_skipped) == (pytest.approx(2 / 3), 0.0, 3, 1)
    assert recall_at_k(results, gold, k=3).all == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        recall_at_k(results, gold[:1], k=2)


def test_top1_agreement():
    a = [[h("A")], [h("B")], [], []]
    b = [[h("A"), h("C")], [h("C")], [h("D")], []]
    ag = top1_agreement(a, b)
    assert (ag.n, ag.n_agree, ag.top1) == (3, 1, pytest.approx(1 / 3))
