"""An agent as someone outside the project writes it: the `openai` package only, a developer message, a
two-parameter calculator schema of its own, and the calculator run by the agent itself."""

from __future__ import annotations

import ast
import json
import operator

OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"},
                                                    "precision": {"type": "integer"}},
                   "required": ["expression"]}}}]


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return OPS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("not arithmetic")


def _calculate(arguments: str) -> str:
    try:
        args = json.loads(arguments)
        return str(round(_value(ast.parse(str(args["expression"]), mode="eval").body), int(args.get("precision", 2))))
    except Exception as exc:  # noqa: BLE001  (the model's arguments: any failure is told back to it)
        return f"error: {exc}"


def agent(client, sample) -> str:
    messages = [{"role": "developer", "content": "Solve the problem. Use the calculator."},
                {"role": "user", "content": sample["question"]}]
    for _ in range(2):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls[:2]:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _calculate(call.function.arguments)})
    return ""
