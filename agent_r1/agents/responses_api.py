"""The Responses API subset the OpenAI Agents SDK uses, mapped onto the chat-completions path.

`to_chat_body` turns a `POST /v1/responses` body into the chat-completions body of the same call, so it
is rendered, sampled and recorded exactly as a chat agent's (one CallRecord; the same trajectory):

- `instructions` -> a leading system message; `input` a string -> one user message; `input` items:
  messages (`role` user / system / developer / assistant, `content` a string or `input_text` /
  `output_text` parts), `function_call` items (`call_id`, `name`, `arguments`) -> the `tool_calls` of
  the assistant message they follow (a reply of text and calls comes back as a message item and then
  its calls: merged, they re-render as the one reply the policy wrote), `function_call_output` items
  (`call_id`, `output`) -> tool messages; item `id` / `status` are the endpoint's own and are not read;
- function tools `{type, name, description, parameters, strict}` -> chat tools;
- `max_output_tokens` -> `max_completion_tokens`; temperature / top_p / tool_choice /
  parallel_tool_calls as in chat (the run decides sampling; responses_fields.py lists every field).

`to_response` writes the chat completion back as a `response` object: a `message` item holding the
text as `output_text` (left out when the reply is calls only) and one `function_call` item per call
(its `call_id` the chat call's id), `status` completed (incomplete, reason max_output_tokens, when the
reply was cut at its budget) and `usage` in the Responses shape.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from agent_r1.agents.protocol import RequestError, content_text, need
from agent_r1.agents.responses_fields import refusal

ROLES = ("user", "system", "developer", "assistant")
TEXT_PARTS = ("input_text", "output_text", "text")


def to_chat_body(body: Any) -> dict[str, Any]:
    """The chat-completions body of a Responses request; RequestError names the Responses field."""
    need(isinstance(body, dict), "the request body must be a JSON object", None)
    refused = refusal(body)
    if refused is not None:
        raise RequestError(refused[1], refused[0])
    need(isinstance(body.get("stream", False), (bool, type(None))), "stream must be true or false", "stream")
    instructions = body.get("instructions")
    need(instructions is None or isinstance(instructions, str), "instructions must be a string", "instructions")
    messages = [{"role": "system", "content": instructions}] if instructions else []
    messages += _messages(body.get("input"))
    need(bool(messages), "input must be a non-empty string or list of items", "input")
    chat: dict[str, Any] = {"messages": messages}
    for key in ("model", "temperature", "top_p", "tool_choice", "parallel_tool_calls"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("tools"):
        chat["tools"] = _tools(body["tools"])
    limit = body.get("max_output_tokens")
    if limit is not None:
        need(isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1,
             f"max_output_tokens must be an integer >= 1, got {limit!r}", "max_output_tokens")
        chat["max_completion_tokens"] = limit
    return chat


def _tools(tools: Any) -> list[dict[str, Any]]:
    need(isinstance(tools, list), "tools must be a list", "tools")
    out = []
    for i, t in enumerate(tools):
        need(isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str),
             f"tools[{i}] must be a function tool {{'type': 'function', 'name': ..., 'parameters': ...}}; "
             f"hosted tools ({t.get('type') if isinstance(t, dict) else t!r}) are not supported: "
             "give the agent its own function", f"tools[{i}]")
        # the keys in the order given (templates render the schema as JSON, so order is prompt tokens);
        # `strict` is left out: sampling is not constrained, so the policy is not told it is
        out.append({"type": "function", "function": {k: v for k, v in t.items()
                                                     if k not in ("type", "strict") and v is not None}})
    return out


def _messages(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    need(isinstance(items, list), "input must be a string or a list of items", "input")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        need(isinstance(item, dict), f"{where} must be an object", where)
        kind = item.get("type", "message" if "role" in item else None)
        read = ITEMS.get(kind)
        need(read is not None, f"{where}.type={kind!r} is not supported; one of {sorted(ITEMS)}", f"{where}.type")
        read(item, where, out)
    return out


def _message(item: dict[str, Any], where: str, out: list[dict[str, Any]]) -> None:
    role = item.get("role")
    need(role in ROLES, f"{where}.role={role!r}; one of {list(ROLES)}", f"{where}.role")
    out.append({"role": role, "content": _text(item.get("content"), f"{where}.content")})


def _function_call(item: dict[str, Any], where: str, out: list[dict[str, Any]]) -> None:
    for key in ("call_id", "name", "arguments"):
        need(isinstance(item.get(key), str), f"{where}.{key} must be a string", f"{where}.{key}")
    call = {"id": item["call_id"], "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]}}
    # a call follows the reply it was part of: its text (a message item) or the calls before it
    if not out or out[-1]["role"] != "assistant":
        out.append({"role": "assistant", "content": None})
    out[-1].setdefault("tool_calls", []).append(call)


def _function_call_output(item: dict[str, Any], where: str, out: list[dict[str, Any]]) -> None:
    need(isinstance(item.get("call_id"), str), f"{where}.call_id must be a string", f"{where}.call_id")
    out.append({"role": "tool", "tool_call_id": item["call_id"],
                "content": _text(item.get("output"), f"{where}.output")})


ITEMS = {"message": _message, "function_call": _function_call, "function_call_output": _function_call_output}


def _text(content: Any, where: str) -> str:
    return content_text(content, where, TEXT_PARTS, "images, files and refusals are not supported")


def to_response(completion: dict[str, Any], body: dict[str, Any], temperature: float, top_p: float) -> dict[str, Any]:
    """The `response` object of a finished chat completion (one choice)."""
    choice = completion["choices"][0]
    message, cut = choice["message"], choice["finish_reason"] == "length"
    output: list[dict[str, Any]] = []
    if message.get("content") is not None or not message.get("tool_calls"):
        text = {"type": "output_text", "text": message.get("content") or "", "annotations": [], "logprobs": []}
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant",
                       "status": "incomplete" if cut else "completed", "content": [text]})
    for call in message.get("tool_calls") or []:
        output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "status": "completed",
                       "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]})
    usage = completion["usage"]
    return {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response",
        "created_at": completion.get("created", int(time.time())),
        "status": "incomplete" if cut else "completed", "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
        "model": completion["model"], "output": output, "parallel_tool_calls": True,
        "previous_response_id": None, "reasoning": None, "store": False,
        "temperature": temperature, "top_p": top_p, "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
        "truncation": "disabled",
        "usage": {"input_tokens": usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": usage["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": usage["total_tokens"]},
        "user": body.get("user"), "metadata": body.get("metadata") or {},
    }
