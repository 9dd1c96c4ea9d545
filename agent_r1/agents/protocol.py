"""The OpenAI chat-completions shapes the endpoint reads and writes, without a server.

`parse_request` checks a request body and returns what rendering and sampling need; a malformed body
raises `RequestError` naming the field, which the endpoint answers with a 400 in OpenAI's error shape
(so the `openai` client raises `BadRequestError` carrying the message). `parse_completion` turns the
sampled text back into an assistant message: Qwen/Hermes `<tool_call>{json}</tool_call>` blocks become
`tool_calls` (the format Qwen2.5's chat template writes and re-renders).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from agent_r1.agents.fields import RUN_DECIDES, refusal
from agent_r1.envs.formats import HermesFormat, tagged_spans

ROLES = ("system", "user", "assistant", "tool", "developer")


class RequestError(ValueError):
    """A request the endpoint cannot serve: `param` names the field (OpenAI's error `param`)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]  # as the chat template reads them (tool-call arguments as objects)
    tools: list[dict[str, Any]] | None
    max_tokens: int | None  # None: the run's per-call budget
    stop: tuple[str, ...]
    temperature: float | None  # what the client asked for; the run's temperature is used instead
    model: str
    ignored: list[str] = field(default_factory=list)  # fields read but overridden by the run
    tool_choice: str = "auto"  # auto | none (none: the tools stay in the prompt, a call comes back as text)
    logprobs: bool = False  # return the sampled tokens' log-probs (choices[0].logprobs.content)
    stream: bool = False  # answer as Server-Sent Events (streaming.py), generated whole first
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage


def need(cond: bool, message: str, param: str | None) -> None:
    if not cond:
        raise RequestError(message, param)


def parse_request(body: Any, served_model: str | None = None) -> ChatRequest:
    """The request, checked; `served_model`: the one model name accepted (None: any). Every field is
    honoured or refused (fields.py)."""
    need(isinstance(body, dict), "the request body must be a JSON object", None)
    refused = refusal(body)
    if refused is not None:
        raise RequestError(refused[1], refused[0])
    need(isinstance(body.get("model", ""), str), "model must be a string", "model")
    need(served_model is None or body.get("model") in (None, "", served_model),
         f"model {body.get('model')!r} is not served here: this endpoint serves {served_model!r}, the policy "
         "being trained", "model")
    need(isinstance(body.get("logprobs", False), (bool, type(None))), "logprobs must be true or false", "logprobs")
    n = body.get("n", 1)
    need(n is None or (type(n) is int and n == 1),  # not `in (1, None)`: true == 1
         f"n={n!r}: this endpoint samples one choice per call (n=1); call again for more samples, each call "
         "is recorded as its own step", "n")
    need(isinstance(body.get("stream", False), (bool, type(None))), "stream must be true or false", "stream")
    options = body.get("stream_options") or {}
    need(isinstance(options, dict) and set(options) <= {"include_usage", "include_obfuscation"}
         and all(isinstance(v, (bool, type(None))) for v in options.values()),
         "stream_options may hold include_usage and include_obfuscation (true or false) only", "stream_options")
    messages = body.get("messages")
    need(isinstance(messages, list) and len(messages) > 0, "messages must be a non-empty list", "messages")
    out = [_message(m, i) for i, m in enumerate(messages)]
    tools = body.get("tools")
    if tools is not None:
        need(isinstance(tools, list), "tools must be a list", "tools")
        for i, t in enumerate(tools):
            need(isinstance(t, dict) and t.get("type", "function") == "function"
                 and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str),
                 'each tool must be {"type": "function", "function": {"name": ..., "parameters": ...}}',
                 f"tools[{i}]")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        need(isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1,
             f"max_tokens must be an integer >= 1, got {max_tokens!r}",
             "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    need(stop is None or (isinstance(stop, list) and all(isinstance(s, str) and s for s in stop)),
         "stop must be a string or a list of non-empty strings", "stop")
    temperature = body.get("temperature")
    need(temperature is None or (isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
                                  and temperature >= 0),
         "temperature must be a number >= 0", "temperature")
    ignored = [k for k in RUN_DECIDES if body.get(k) is not None]
    # tool_choice none keeps the tools in the prompt: the policy conditions on the same rendering as on
    # the session's other calls (no drift), and whatever it writes comes back as text
    return ChatRequest(out, tools or None, max_tokens, tuple(stop or ()), temperature,
                       body.get("model") or "", ignored, tool_choice=body.get("tool_choice") or "auto",
                       logprobs=bool(body.get("logprobs")), stream=bool(body.get("stream")),
                       include_usage=bool(options.get("include_usage")))


def _message(m: Any, i: int) -> dict[str, Any]:
    where = f"messages[{i}]"
    need(isinstance(m, dict), f"{where} must be an object", where)
    role = m.get("role")
    need(role in ROLES, f"{where}.role={role!r}; one of {list(ROLES)}", f"{where}.role")
    content = content_text(m.get("content"), f"{where}.content")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role, "content": content}
    if role == "tool":
        need(isinstance(m.get("tool_call_id", ""), str), "tool_call_id must be a string", f"{where}.tool_call_id")
        if m.get("tool_call_id"):
            out["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            out["name"] = m["name"]
    calls = m.get("tool_calls")
    if role == "assistant" and calls:
        need(isinstance(calls, list), "tool_calls must be a list", f"{where}.tool_calls")
        out["tool_calls"] = [_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)]
    return out


def content_text(content: Any, where: str, part_types: tuple[str, ...] = ("text",),
                 unsupported: str = "images are not supported") -> str:
    """A message's content as the template's string: None -> "", a list of text parts (of `part_types`,
    the first named in the error) joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    need(isinstance(content, list), f"{where} must be a string or a list of text parts", where)
    texts = []
    for j, part in enumerate(content):
        need(isinstance(part, dict) and part.get("type") in part_types and isinstance(part.get("text"), str),
             f"{where}[{j}] must be a text part ({{'type': '{part_types[0]}', 'text': ...}}); {unsupported}",
             f"{where}[{j}]")
        texts.append(part["text"])
    return "".join(texts)


def _call(c: Any, where: str) -> dict[str, Any]:
    """An OpenAI tool call -> the template's form. OpenAI sends `arguments` as a JSON string; chat
    templates (Qwen2.5's `arguments | tojson`) expect an object, else they would render it quoted,
    and the re-rendered history would differ from what the model wrote (vLLM converts it the same way)."""
    fn = c.get("function") if isinstance(c, dict) else None
    need(isinstance(fn, dict) and isinstance(fn.get("name"), str),
         f'{where} must be {{"id": ..., "type": "function", "function": {{"name": ..., "arguments": ...}}}}', where)
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise RequestError(f"{where}.function.arguments is not valid JSON ({exc.msg})",
                               f"{where}.function.arguments") from exc
    need(isinstance(args, dict), f"{where}.function.arguments must be a JSON object", f"{where}.function.arguments")
    out = {"type": "function", "function": {"name": fn["name"], "arguments": args}}
    if isinstance(c.get("id"), str):
        out["id"] = c["id"]
    return out


def parse_completion(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content, tool_calls) of the sampled text. Only well-formed calls become tool calls; a text whose
    blocks do not all parse is returned whole as content (as vLLM's hermes parser does), so the agent
    sees what the model wrote."""
    spans = tagged_spans(text, ["tool_call"])
    if not spans:
        return text, []
    calls = [HermesFormat._parse_call(body) for _, body in spans]
    if any(c.error for c in calls):
        return text, []
    head = text.split("<tool_call>", 1)[0].strip()
    return (head or None), [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
        for c in calls]


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape; the `openai` client puts `message` in the exception it raises."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


_PROBE_TOOL = "agent_r1_probe_tool"


def renders_tool_calls(tokenizer: Any) -> bool:
    """Whether the chat template writes an assistant message's tool_calls (ChatML as written for local
    models writes the text only). A template that cannot render the probe at all is not judged here."""
    probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": _PROBE_TOOL, "arguments": {}}}]}]
    try:
        return _PROBE_TOOL in tokenizer.apply_chat_template(probe, tokenize=False)
    except Exception:  # noqa: BLE001  (its own rendering errors surface on the first call)
        return True
