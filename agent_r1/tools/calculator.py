"""The calculator tool: a safe arithmetic evaluator over Python's `ast`, never `eval`.

Only numbers, `+ - * / // % **`, unary minus/plus and parentheses are accepted. Expression
length, nesting depth, exponent size and the size of every intermediate result are bounded,
so no input can make the tool hang or eat memory. Every rejection is a `CalculatorError`
whose message says what was wrong and what is allowed; the tool returns it as a failed
`ToolResult`, so the model reads it as an observation.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from typing import Any

from agent_r1.tools.base import ToolResult
from agent_r1.tools.registry import register_tool

ALLOWED = "numbers, + - * / // % ** and parentheses"


class CalculatorError(ValueError):
    """An expression the calculator refuses; the message is meant for the model."""


@dataclass(frozen=True)
class CalculatorLimits:
    max_chars: int = 200  # longer input is rejected before parsing
    max_depth: int = 32  # nesting of operators and parentheses in the parsed tree
    max_exponent: int = 100  # |b| in a ** b
    max_digits: int = 100  # every intermediate |value| stays below 10 ** max_digits


_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_HINTS = {  # what a model typically meant when it wrote an operator Python reads differently
    ast.BitXor: "'^' is not a power here; write 2 ** 3",
    ast.MatMult: "'@' is not an operator here",
}


def evaluate(expression: str, limits: CalculatorLimits = CalculatorLimits()) -> int | float:
    """The value of `expression`; raises `CalculatorError` with a message for the model."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError(f"empty expression; write {ALLOWED}, e.g. (12 + 7) * 3")
    if len(expression) > limits.max_chars:
        raise CalculatorError(f"expression is {len(expression)} characters long; the limit is {limits.max_chars}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"cannot parse {expression.strip()!r} ({exc.msg}); write {ALLOWED}") from None
    except (RecursionError, MemoryError, ValueError):
        raise CalculatorError("expression is nested too deeply") from None
    return _Evaluator(limits).visit(tree.body, 1)


def format_number(value: int | float) -> str:
    """Integers as they are; floats with up to 12 significant digits, `2.0` as `2`."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}" if isinstance(value, float) else str(value)


class _Evaluator:
    def __init__(self, limits: CalculatorLimits):
        self.limits = limits
        self.max_abs = 10 ** limits.max_digits

    def visit(self, node: ast.AST, depth: int) -> int | float:
        if depth > self.limits.max_depth:
            raise CalculatorError(f"expression is nested more than {self.limits.max_depth} levels deep")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise CalculatorError(f"{node.value!r} is not a number; only {ALLOWED} are allowed")
            return self._checked(node.value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return self._checked(_UNARY[type(node.op)](self.visit(node.operand, depth + 1)))
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                hint = _HINTS.get(type(node.op), f"operator {type(node.op).__name__} is not allowed")
                raise CalculatorError(f"{hint}; only {ALLOWED} are allowed")
            left = self.visit(node.left, depth + 1)
            right = self.visit(node.right, depth + 1)
            return self._binary(node.op, left, right)
        raise CalculatorError(self._refusal(node))

    def _binary(self, op: ast.operator, left: int | float, right: int | float) -> int | float:
        if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise CalculatorError("division by zero")
        if isinstance(op, ast.Pow):
            if abs(right) > self.limits.max_exponent:
                raise CalculatorError(f"exponent {format_number(right)} is too large; the limit is "
                                      f"{self.limits.max_exponent}")
            if left == 0 and right < 0:
                raise CalculatorError("zero cannot be raised to a negative power")
            # the digits of the result, estimated before computing it
            if left not in (0, 1, -1) and right > 0 and right * math.log10(abs(left)) > self.limits.max_digits:
                raise CalculatorError(f"result has more than {self.limits.max_digits} digits")
            if left < 0 and isinstance(right, float) and not right.is_integer():
                raise CalculatorError("a negative number cannot be raised to a fractional power")
        try:
            value = _BINARY[type(op)](left, right)
        except (OverflowError, ZeroDivisionError) as exc:
            raise CalculatorError(f"arithmetic error: {exc}") from None
        return self._checked(value)

    def _checked(self, value: Any) -> int | float:
        if isinstance(value, complex):
            raise CalculatorError("the result is not a real number")
        if isinstance(value, float) and not math.isfinite(value):
            raise CalculatorError("the result is too large (not finite)")
        if abs(value) >= self.max_abs:
            raise CalculatorError(f"a value has more than {self.limits.max_digits} digits")
        return value

    @staticmethod
    def _refusal(node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return f"unknown name {node.id!r}; only {ALLOWED} are allowed"
        if isinstance(node, ast.Call):
            return f"function calls are not allowed; only {ALLOWED} are allowed"
        if isinstance(node, ast.Tuple):
            return "commas are not allowed: write one expression, and numbers without thousands separators"
        if isinstance(node, ast.Compare):
            return f"comparisons and '=' are not allowed; only {ALLOWED} are allowed"
        return f"{type(node).__name__} is not allowed; only {ALLOWED} are allowed"


@register_tool("calculator")
class CalculatorTool:
    name = "calculator"
    # Runs in the rollout's process: CalculatorLimits bound every evaluation to microseconds and it
    # has no side effects, so a worker process would add a round-trip and protect nothing.
    isolate = False
    description = "Evaluate an arithmetic expression with + - * / // % ** and parentheses, e.g. (12 + 7) * 3."
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "the arithmetic expression"}},
        "required": ["expression"],
        "additionalProperties": False,
    }

    def __init__(self, **limits: int):  # env.tool_args.calculator: CalculatorLimits' fields
        self.limits = CalculatorLimits(**limits)

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        expression = arguments.get("expression", "")
        try:
            value = evaluate(expression, self.limits)
        except CalculatorError as exc:
            return ToolResult(f"Error: {exc}", success=False, metadata={"error": "calculator"})
        return ToolResult(format_number(value), success=True, metadata={"value": value})
