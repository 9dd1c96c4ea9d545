"""A chat completion written as the Server-Sent Events a `stream=true` call expects.

The endpoint generates a call whole (the batcher decodes many sessions' calls together, and the stop
string, tool-call parsing and the record all need the finished reply), then sends it as the
`chat.completion.chunk` events OpenAI streams: the role first, the content, each tool call as its
own index with id and name and then its arguments, the finish reason in a chunk of its own, the usage
in a last chunk without choices when `stream_options.include_usage` asks for it, then `data: [DONE]`.
The `openai` package's stream (and its `chat.completions.stream` helper, which adds the deltas up)
reads these back into the same message the unstreamed call returns; what is recorded is the same
call either way, since the chunks are cut from the finished answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def chat_chunks(completion: dict[str, Any], include_usage: bool = False) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a finished `chat.completion` (one choice)."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {k: completion[k] for k in ("id", "created", "model")}
    usage_field = {"usage": None} if include_usage else {}  # OpenAI sends null on all but the last one

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> dict[str, Any]:
        return {**head, "object": "chat.completion.chunk", **usage_field,
                "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}

    # content null when the reply is calls only, as OpenAI sends it: an accumulator then reads None back.
    # The log-probs cover the whole reply as sampled (a call's text too): they ride with the content, or
    # with the first chunk when there is none (an empty content chunk would turn None into "")
    content, logprobs = message.get("content"), choice.get("logprobs")
    first = {"role": "assistant", "content": None if content is None else ""}
    if content:
        out = [chunk(first), chunk({"content": content}, logprobs=logprobs)]
    else:
        out = [chunk(first, logprobs=logprobs)]
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": fn["name"], "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]}))
    out.append(chunk({}, finish=choice["finish_reason"]))
    if include_usage:
        out.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]})
    return out


def sse_lines(events: list[dict[str, Any]]) -> Iterator[bytes]:
    """`data: {json}` per event, then the `[DONE]` sentinel the `openai` client stops at."""
    for event in events:
        yield f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
    yield b"data: [DONE]\n\n"
