"""A question-answering agent written as a user would write it: the `openai` package and the standard
library only, no agent_r1 import. It is trained unchanged with three lines of params.yaml:

    env:
      kind: openai_agent
      agent: examples.qa_agent:agent      # this function (imported from the working directory)

The trainer calls `agent(client, sample)` once per session: `client` is an `openai.OpenAI` already
pointed at the policy's endpoint (its API key is the session), `sample` the data row. The agent loops:
ask the model, run the `search` tool calls it makes, send the results back, until it answers; the
answer string is returned and the run's `reward.metric` scores it against the row's answers.

The search tool runs here, in the agent, as any harness's tools do. It ranks documents by the words
they share with the query: the row's own `docs` ([{"title", "text"}]) when it carries them, else the
corpus file named by QA_AGENT_CORPUS (default: data/synthetic/corpus.jsonl, the synthetic task's, read
from the working directory). An honest, tiny retriever: swap in your own search service.
"""

from __future__ import annotations

import json
import os
import re

SEARCH_TOOL = {"type": "function", "function": {
    "name": "search", "description": "Search the encyclopedia; returns the best matching passages.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
SYSTEM = ("Answer the question. Call the search tool to look facts up. When you know the answer, reply "
          "with the answer alone.")
_CORPUS: list[dict] | None = None


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _documents(sample: dict) -> list[dict]:
    global _CORPUS
    if sample.get("docs"):
        return sample["docs"]
    if _CORPUS is None:
        path = os.environ.get("QA_AGENT_CORPUS", "data/synthetic/corpus.jsonl")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no corpus at {path!r}: set QA_AGENT_CORPUS to a corpus.jsonl")
        with open(path, encoding="utf-8") as f:
            _CORPUS = [json.loads(line) for line in f if line.strip()]
    return _CORPUS


def search(query: str, docs: list[dict], k: int = 2) -> str:
    """The k documents sharing the most words with the query, as text for the model."""
    q = _words(query)
    ranked = sorted(docs, key=lambda d: -len(q & _words(d.get("title", "") + " " + d.get("text", ""))))
    hits = [f"({i + 1}) {d.get('title', '')}: {d.get('text', '')}" for i, d in enumerate(ranked[:k])]
    return "\n".join(hits) or "no results"


def agent(client, sample: dict, max_turns: int = 3, max_tokens: int | None = None) -> str:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": sample["question"]}]
    extra = {"max_tokens": max_tokens} if max_tokens else {}
    for _ in range(max_turns):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=[SEARCH_TOOL], **extra)
        msg = reply.choices[0].message
        if not msg.tool_calls:
            return (msg.content or "").strip()
        messages.append({"role": "assistant", "content": msg.content or "", "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls]})
        for call in msg.tool_calls:
            try:
                query = str(json.loads(call.function.arguments).get("query", ""))
                result = search(query, _documents(sample)) if call.function.name == "search" else \
                    f"error: unknown tool {call.function.name!r}"
            except (ValueError, AttributeError):
                result = "error: the arguments are not a JSON object with a query"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""  # no answer within max_turns: scored as a wrong answer
