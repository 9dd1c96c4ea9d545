"""A finished `response` object written as the Responses API's event stream (`stream: true`).

As for chat completions (streaming.py) the call is generated whole first, then sent as the events
OpenAI streams, each `event: <type>` / `data: {json}` with a `sequence_number`: `response.created` and
`response.in_progress` (the response in progress, no output yet); per output item `output_item.added`,
then for a message `content_part.added`, one `output_text.delta` with the whole text,
`output_text.done`, `content_part.done`, and for a function call one `function_call_arguments.delta`
and `.done`; `output_item.done`; last `response.completed` (`response.incomplete` when the reply was
cut at its budget) holding the whole response. This is what the Agents SDK's `Runner.run_streamed`
and the `openai` package's `responses.stream` helper read.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any


def response_events(final: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream events of a finished response object, numbered from 0."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    started = {**copy.deepcopy(final), "status": "in_progress", "output": [], "usage": None,
               "incomplete_details": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(final["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            for c, part in enumerate(item["content"]):
                emit("response.content_part.added", **at, content_index=c, part={**part, "text": ""})
                emit("response.output_text.delta", **at, content_index=c, delta=part["text"], logprobs=[])
                emit("response.output_text.done", **at, content_index=c, text=part["text"], logprobs=[])
                emit("response.content_part.done", **at, content_index=c, part=part)
        else:  # a function call
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            emit("response.function_call_arguments.delta", **at, delta=item["arguments"])
            emit("response.function_call_arguments.done", **at, name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.incomplete" if final["status"] == "incomplete" else "response.completed", response=final)
    return events


def sse_events(events: list[dict[str, Any]]) -> Iterator[bytes]:
    """`event: <type>` and `data: {json}` per event; the Responses stream ends with its last event
    (no `[DONE]` sentinel, as OpenAI sends it)."""
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
