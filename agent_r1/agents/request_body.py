"""Reading a request body within bounds, and refusing JSON no later step could handle.

Everything here runs before a body reaches `parse_request` and the tokenizer, so a caller holding a
session key cannot make the endpoint spend memory or CPU on a body it will refuse anyway:
- size: over `max_bytes` is a 413, refused from `Content-Length` before reading, else while reading
  (a chunked body has no length to check up front);
- time: a body not fully read within `timeout_s` is a 408 (a client trickling its body would
  otherwise hold the connection and its task for as long as it likes);
- JSON: strict (NaN and Infinity are not JSON), at most `max_depth` levels of arrays and objects (the
  parser and the chat template's `tojson` recurse: deep nesting is a RecursionError, not an answer),
  and no lone surrogates in any string or key (`"\\ud800"` parses to a str that no UTF-8 encoder, the
  tokenizer's included, can write).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


class BodyError(Exception):
    """A body refused before parsing: `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def read_body(request: Any, max_bytes: int, timeout_s: float) -> bytes:
    """The body of a Starlette `request`, at most `max_bytes`, read within `timeout_s`."""
    too_big = (f"the request body is over the endpoint's limit of {max_bytes} bytes "
               "(EndpointConfig.max_body_bytes)")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise BodyError(413, too_big)

    async def read() -> bytes:
        parts, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise BodyError(413, too_big)
            parts.append(chunk)
        return b"".join(parts)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    except asyncio.TimeoutError:
        raise BodyError(408, f"the request body was not received within {timeout_s}s "
                             "(EndpointConfig.body_timeout_s)") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(raw: bytes, max_depth: int) -> Any:
    """The JSON value of `raw`, checked; BodyError(400) naming what is wrong."""
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise BodyError(400, f"the request body is nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, bad UTF-8 (UnicodeDecodeError), NaN / Infinity
        raise BodyError(400, f"the request body is not valid JSON ({exc})") from None
    check_value(value, max_depth)
    return value


def check_value(value: Any, max_depth: int) -> None:
    """Walks `value` without recursion: its depth and every string (keys included)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise BodyError(400, "the request body holds a lone UTF-16 surrogate (\\ud800-\\udfff) in a "
                                     "string: it is not valid Unicode text")
        elif isinstance(item, (dict, list)):
            if depth >= max_depth:
                raise BodyError(400, f"the request body is nested deeper than {max_depth} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
