"""An arithmetic agent as someone outside the project writes it: the `openai` package's client and the
standard library only (no agent_r1 import), trained by benchmarks/outside_agent.py through
`env.kind: openai_agent` (docs/agents.md's three lines).

Its own choices, none of them the built-in env's: a developer message and the question sent as content
parts, a calculator schema of its own with two parameters (`expression`, `precision`), at most two
calculator calls run per turn (a third is answered "skipped", as the API wants every call answered),
every reply appended to the history as the client returned it, and after `MAX_TOOL_TURNS` turns of
calls a final-answer step: one more call with `tool_choice="none"` (the tools stay listed; a call the
model still writes comes back as text). It returns what the model wrote inside <answer></answer>, else
the reply's text, scored by the run's numeric metric.
"""

from __future__ import annotations

import ast
import json
import operator
import re

MAX_TOOL_TURNS = 3  # the task's longest plan is two calculator steps
MAX_CALLS_PER_TURN = 2
DEVELOPER = "Solve the problem. Use the calculator."
TOOLS = [{"type": "function", "function": {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression (+ - * / and parentheses).",
    "parameters": {"type": "object",
                   "properties": {"expression": {"type": "string", "description": "e.g. 37 * 24"},
                                  "precision": {"type": "integer", "description": "decimal places, default 2"}},
                   "required": ["expression"]}}}]
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    raise ValueError("only numbers, + - * / and parentheses")


def calculate(arguments: str) -> str:
    """The tool's answer to one call's JSON arguments; any failure is told back to the model."""
    try:
        args = json.loads(arguments)
        value = round(_value(ast.parse(str(args["expression"]).strip(), mode="eval").body),
                      int(args.get("precision", 2)))
        return str(int(value)) if float(value).is_integer() else str(value)
    except Exception as exc:  # noqa: BLE001  (the model's arguments: whatever fails is an observation)
        return f"error: {exc}"


def _final(text: str | None) -> str:
    found = _ANSWER.search(text or "")
    return (found.group(1) if found else text or "").strip()


def agent(client, sample) -> str:
    messages = [{"role": "developer", "content": [{"type": "text", "text": DEVELOPER}]},
                {"role": "user", "content": [{"type": "text", "text": sample["question"]}]}]
    for _ in range(MAX_TOOL_TURNS):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0].message
        if not reply.tool_calls:
            return _final(reply.content)
        messages.append(reply.model_dump(exclude_none=True))
        for i, call in enumerate(reply.tool_calls):
            result = calculate(call.function.arguments) if i < MAX_CALLS_PER_TURN else \
                f"skipped: at most {MAX_CALLS_PER_TURN} calculator calls per turn"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS, tool_choice="none")
    return _final(final.choices[0].message.content)
