import pytest

from agent_r1.rewards.qa import exact_match, f1_score, normalize_answer, substring_match


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  a   cat, an apple; the END. ", "cat apple end"),
        ("theater", "theater"),  # articles only as whole words
        ("Café Society!", "café society"),  # unicode letters kept, ASCII punctuation dropped
        ("U.S.A.", "usa"),
        ("", ""),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


def test_exact_match_multiple_golds_takes_max():
    assert exact_match("the Beatles", ["Rolling Stones", "Beatles"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0
    assert exact_match("anything", []) == 0.0
    assert exact_match("Paris", "paris.") == 1.0


def test_f1_partial_overlap_and_max_over_golds():
    # pred tokens: [new, york, city]; gold: [new, york] -> P=2/3, R=1 -> F1=0.8
    assert f1_score("New York City", "new york") == pytest.approx(0.8)
    assert f1_score("New York City", ["Boston", "New York City"]) == 1.0
    assert f1_score("", "x") == 0.0


@pytest.mark.parametrize("pred, gold", [("yes", "no"), ("no", "yes"), ("yes it is", "yes"), ("noanswer", "no answer")])
def test_f1_yes_no_mismatch_scores_zero(pred, gold):
    assert f1_score(pred, gold) == 0.0


def test_f1_yes_matches_yes():
    assert f1_score("Yes", "yes") == 1.0


def test_substring_match():
    assert substring_match("It was born in Paris, France", ["paris"]) == 1.0
    assert substring_match("Parisian", "paris france") == 0.0
    assert substring_match("anything", [""]) == 0.0  # an empty gold never matches


def test_numeric_answer_metric():
    """The arithmetic task's answer metric (moved here from test_extending.py)."""
    from agent_r1.rewards.qa import numeric_match, parse_number

    assert parse_number("$1,204.") == 1204.0 and parse_number("37 * 24 = 888") == 888.0 and parse_number("none") is None
    assert numeric_match("888", ["888"]) == 1.0 and numeric_match("888.0 apples", "888") == 1.0
    assert numeric_match("-3", ["3"]) == 0.0 and numeric_match("", ["3"]) == 0.0 and numeric_match("3", ["x"]) == 0.0
