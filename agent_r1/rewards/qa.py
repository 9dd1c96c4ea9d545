"""Answer metrics that follow the official HotpotQA / SQuAD evaluation script exactly.

`golds` may be one string or a list of accepted answers; every metric takes the max over golds.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, fold white space (SQuAD order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _as_list(golds: str | Sequence[str]) -> list[str]:
    if isinstance(golds, str):
        return [golds]
    return [g for g in golds if isinstance(g, str)]


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return max((float(pred == normalize_answer(g)) for g in _as_list(golds)), default=0.0)


def _f1_one(prediction: str, gold: str) -> float:
    pred_n, gold_n = normalize_answer(prediction), normalize_answer(gold)
    # HotpotQA: a yes/no/noanswer on either side only scores when both are identical.
    if pred_n in _SPECIAL and pred_n != gold_n:
        return 0.0
    if gold_n in _SPECIAL and pred_n != gold_n:
        return 0.0
    pred_tokens, gold_tokens = pred_n.split(), gold_n.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: str | Sequence[str]) -> float:
    return max((_f1_one(prediction, g) for g in _as_list(golds)), default=0.0)


def substring_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 when a normalised gold occurs inside the normalised prediction (substring EM)."""
    pred = normalize_answer(prediction)
    return max(
        (float(bool(g_n) and g_n in pred) for g_n in map(normalize_answer, _as_list(golds))),
        default=0.0,
    )


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def parse_number(text: str) -> float | None:
    """The last number in `text` ("$1,204." -> 1204.0, "37 * 24 = 888" -> 888.0), or None."""
    found = _NUMBER.findall(text or "")
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def numeric_match(prediction: str, golds: str | Sequence[str]) -> float:
    """1.0 when the last number in the prediction equals a gold number (relative tolerance 1e-6)."""
    pred = parse_number(prediction)
    if pred is None:
        return 0.0
    return max((float(g is not None and abs(pred - g) <= 1e-6 * max(1.0, abs(g)))
                for g in map(parse_number, _as_list(golds))), default=0.0)
