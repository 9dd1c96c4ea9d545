"""The calculator: exact arithmetic, bounded work, and refusals that read as observations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_r1.tools.calculator import CalculatorError, CalculatorLimits, CalculatorTool, evaluate, format_number


@pytest.mark.parametrize("expr, value", [
    ("1 + 2", 3), ("(12 + 7) * 3", 57), ("7 / 2", 3.5), ("7 // 2", 3), ("7 % 4", 3), ("2 ** 10", 1024),
    ("-3 + -4", -7), ("--5", 5), ("+2", 2), ("2 ** -1", 0.5), ("1_000 * 3", 3000), ("0.1 + 0.2", 0.1 + 0.2),
    ("-(2 - 10) // 3", 2), ("  4 * 5  ", 20), ("(" * 60 + "1" + ")" * 60, 1),
])
def test_values(expr, value):
    assert evaluate(expr) == value


@pytest.mark.parametrize("expr, message", [
    ("", "empty expression"),
    ("__import__('os')", "function calls are not allowed"),
    ("x + 1", "unknown name 'x'"),
    ("2 ^ 3", "write 2 ** 3"),
    ("1,000 + 1", "commas are not allowed"),
    ("3 < 4", "comparisons"),
    ("a = 3", "cannot parse"),
    ("1 / 0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("0 ** -1", "negative power"),
    ("(-8) ** 0.5", "fractional power"),
    ("9 ** 999", "exponent 999 is too large"),
    ("10 ** 60 * 10 ** 60", "more than 100 digits"),
    ("99 ** 99", "more than 100 digits"),
    ("1e308 * 10", "more than 100 digits"),
    ("'abc'", "not a number"),
    ("True + 1", "not a number"),
    ("[1, 2]", "List is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("1 if 1 else 2", "IfExp is not allowed"),
    ("1" + " + 1" * 100, "characters long"),
    ("-" * 40 + "1", "nested more than 32"),
    ("2 ** 2 ** 2 ** 2 ** 2", "exponent 65536 is too large"),
])
def test_refusals_say_what_is_wrong(expr, message):
    with pytest.raises(CalculatorError, match=None) as err:
        evaluate(expr)
    assert message in str(err.value), str(err.value)


def test_deep_nesting_is_refused_even_past_the_length_limit():
    roomy = CalculatorLimits(max_chars=100_000)
    for expr in ("(" * 5000 + "1" + ")" * 5000, "-" * 5000 + "1", "1" + "+1" * 5000):
        with pytest.raises(CalculatorError, match="nest|parse"):
            evaluate(expr, roomy)


def test_tool_turns_refusals_into_failed_results():
    tool = CalculatorTool()
    ok = tool.call({"expression": "37 * 24"})
    assert ok.success and ok.text == "888" and ok.metadata["value"] == 888
    bad = tool.call({"expression": "2 ^ 3"})
    assert not bad.success and bad.text.startswith("Error: ") and bad.metadata["error"] == "calculator"


def test_limits_are_options():
    tool = CalculatorTool(max_exponent=3)
    assert not tool.call({"expression": "2 ** 4"}).success
    assert evaluate("2 ** 200", CalculatorLimits(max_exponent=300, max_digits=100)) == 2 ** 200


def test_number_formatting():
    assert [format_number(v) for v in (2.0, 3.5, 888, -7, 1 / 3, 1e20)] == ["2", "3.5", "888", "-7",
                                                                          "0.333333333333", "1e+20"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-*/%(). e_^x", max_size=60))
def test_any_input_returns_a_number_or_a_refusal(expr):
    try:
        value = evaluate(expr)
    except CalculatorError as exc:
        assert str(exc)
    else:
        assert isinstance(value, (int, float)) and abs(value) < 10 ** 100


@settings(max_examples=200, deadline=None)
@given(st.integers(-10 ** 6, 10 ** 6), st.integers(-10 ** 6, 10 ** 6), st.sampled_from(["+", "-", "*", "//", "%"]))
def test_agrees_with_python_on_integers(a, b, op):
    expr = f"({a}) {op} ({b})"
    if op in ("//", "%") and b == 0:
        with pytest.raises(CalculatorError):
            evaluate(expr)
    else:
        assert evaluate(expr) == {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0,
                                  "%": a % b if b else 0}[op]
