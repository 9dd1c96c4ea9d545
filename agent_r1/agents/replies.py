"""The replies a session was given, so that one sent back unchanged is rendered as it was sampled.

An agent appends the endpoint's reply to its history and sends it back on its next call. Re-encoded
from its text, the reply loses what the text cannot carry: a special token the policy sampled
(`<tool_call>`, `<answer>`) would come back as plain-text pieces, and a word tokenised other than
canonically would come back canonical. The next prompt then does not extend the previous call's
prompt + completion, and the session splits (assemble.py, `agent/drift`). So each reply is kept with
the ids sampled for it, keyed by what the agent sees of it (its content and tool calls, the calls'
ids left out: they are the endpoint's own, not the policy's text), and an assistant message equal to
one is written as those ids (ChatCodec.prompt_ids). An assistant message that equals no reply (edited
or invented by the agent) is untrusted text, encoded as data like any other content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

ReplyKey = tuple[str, tuple[tuple[str, str], ...]]  # (content, ((tool name, arguments as JSON), ...))


def reply_key(content: str | None, tool_calls: list[dict[str, Any]] | None) -> ReplyKey | None:
    """The key of an assistant message, either as the endpoint returns it (arguments a JSON string) or
    as a request is parsed (arguments an object); None when a call is not in either shape."""
    calls = []
    for call in tool_calls or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return None
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                return None
        # key order kept: the template writes the arguments in the order given
        calls.append((fn["name"], json.dumps(args, ensure_ascii=False)))
    return content or "", tuple(calls)


@dataclass
class Replies:
    """One session's replies: key -> [(the reply's place in the history, its sampled ids)], in the
    order they were returned."""

    by_key: dict[ReplyKey, list[tuple[int, tuple[int, ...]]]] = field(default_factory=dict)

    def add(self, key: ReplyKey, position: int, ids: list[int]) -> None:
        self.by_key.setdefault(key, []).append((position, tuple(ids)))

    def sampled(self, messages: list[dict[str, Any]]) -> dict[int, tuple[int, ...]]:
        """Message index -> the sampled ids, for each assistant message equal to a reply. Two replies with
        the same text may have been sampled as different ids: the one returned for this place in the
        history (the reply to a call of n messages is the (n+1)-th) is taken, else the latest."""
        out = {}
        for i, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            found = self.by_key.get(reply_key(m.get("content"), m.get("tool_calls")))  # type: ignore[arg-type]
            if found:
                out[i] = next((ids for position, ids in reversed(found) if position == i), found[-1][1])
        return out
