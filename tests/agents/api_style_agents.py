"""Two agents as people write them against the other OpenAI surfaces, for the training test:

- `responses_agent`: the OpenAI Agents SDK's loop (async, `responses.create` with instructions, input
  items and strict function tools; the reply's output items go back as input, dumped as the SDK dumps
  them, followed by each call's `function_call_output`); `responses_streaming_agent` the same loop
  reading each response from its event stream, as `Runner.run_streamed` does;
- `streaming_agent`: a chat agent that streams every call (`stream=True`, usage included) and adds the
  deltas up itself, tool calls by index.

Both run the example's search over the row's docs, and after their first plain answer ask once more
("Final answer, one word?"), as a self-check step does, so every session has at least two calls and
its trajectory more than one trained turn. `CALLS` counts what each agent saw, for the test to check
the calls went through the API it meant to use.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

from examples.qa_agent import _documents, search

CALLS: Counter = Counter()
INSTRUCTIONS = "Answer the question. Call the search tool to look facts up."
CHECK = "Final answer, one word?"
MAX_CALLS = 4
PARAMETERS = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
              "additionalProperties": False}
RESPONSES_TOOLS = [{"type": "function", "name": "search", "description": "Search the documents.",
                    "parameters": PARAMETERS, "strict": True}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search the documents.",
                                                "parameters": PARAMETERS}}]
# each async session runs on a loop and thread of its own, and `CALLS[k] += 1` is a read then a write:
# two sessions counting at once could lose one
_CALLS_LOCK = threading.Lock()


def _count(kind: str) -> None:
    with _CALLS_LOCK:
        CALLS[kind] += 1


def _run_search(arguments: str, sample: dict) -> str:
    try:
        query = str(json.loads(arguments).get("query", ""))
    except (json.JSONDecodeError, AttributeError):
        return "error: arguments are not a JSON object"
    return search(query, _documents(sample))


async def _response(client, items: list, stream: bool):
    """One Responses call; streamed, the final response is the one the last event carries (as the
    Agents SDK's `Runner.run_streamed` takes it)."""
    kw = {"model": "policy", "instructions": INSTRUCTIONS, "input": items, "tools": RESPONSES_TOOLS, "include": []}
    if not stream:
        return await client.responses.create(**kw)
    final = None
    async for event in await client.responses.create(stream=True, **kw):
        if event.type in ("response.completed", "response.incomplete"):
            final = event.response
    return final


async def responses_agent(client, sample: dict, stream: bool = False) -> str:
    items: list = [{"role": "user", "content": sample["question"]}]
    checked, answer = False, ""
    for _ in range(MAX_CALLS):
        resp = await _response(client, items, stream)
        if resp is None or resp.object != "response" or resp.usage is None:
            raise RuntimeError(f"not a response: {resp!r:.200}")
        _count("responses_streamed" if stream else "responses")
        items += [o.model_dump(exclude_unset=True) for o in resp.output]
        calls = [o for o in resp.output if o.type == "function_call"]
        answer = resp.output_text
        if not calls and checked:
            break
        if not calls:
            checked = True
            items.append({"role": "user", "content": [{"type": "input_text", "text": CHECK}]})
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": _run_search(c.arguments, sample)}
                  for c in calls]
    return answer


async def responses_streaming_agent(client, sample: dict) -> str:
    return await responses_agent(client, sample, stream=True)


def _streamed(client, messages: list) -> tuple[str | None, list[dict]]:
    """One streamed call added up: (content, tool_calls as the history sends them back)."""
    content, calls, usage = None, {}, None
    for chunk in client.chat.completions.create(model="policy", messages=messages, tools=CHAT_TOOLS, stream=True,
                                                stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content is not None:
            content = (content or "") + delta.content
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            slot["id"] = tc.id or slot["id"]
            slot["function"]["name"] += (tc.function.name or "") if tc.function else ""
            slot["function"]["arguments"] += (tc.function.arguments or "") if tc.function else ""
    if usage is None:
        raise RuntimeError("the stream carried no usage chunk")
    _count("streamed")
    return content, [calls[i] for i in sorted(calls)]


def streaming_agent(client, sample: dict) -> str:
    messages: list = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": sample["question"]}]
    checked, content = False, None
    for _ in range(MAX_CALLS):
        content, calls = _streamed(client, messages)
        messages.append({"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})})
        if not calls and checked:
            break
        if not calls:
            checked = True
            messages.append({"role": "user", "content": CHECK})
        messages += [{"role": "tool", "tool_call_id": c["id"],
                      "content": _run_search(c["function"]["arguments"], sample)} for c in calls]
    return content or ""
