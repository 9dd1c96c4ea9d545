"""The learning benchmark's endpoint agent (benchmarks/learning.py, variant grpo_endpoint): the built-in
hermes env's episode written as a user writes an agent, with the `openai` package and the standard
library only (no agent_r1 import), trained through the endpoint with `env.kind: openai_agent`.

What it sends is what the built-in env (env.format hermes, format_instructions off) renders: an empty
system message, the question, and the tools the search service lists (the run's own search tool schema).
Its tool calls go to the search service at $QA_SEARCH_URL (benchmarks/agents/search_service.py: the run's
index through the run's own search tool, its text cut to the rollout's observation budget), so the tool
results are the built-in env's. It returns what the model wrote inside <answer></answer>, as the env
reads an answer, within $QA_AGENT_MAX_TURNS calls (the run's rollout.max_turns; default 4).

Where it differs from the env (an agent's own choices, counted by the endpoint's metrics): a turn with
neither an answer nor a call the endpoint could parse ends the session, and its text is scored as the
answer (the env answers such a turn with an error observation and lets the model go on); several calls
in a turn are each cut to the budget (the env shares one budget among them).
"""

from __future__ import annotations

import json
import os
import re
import urllib.request

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _request(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def agent(client, sample: dict) -> str:
    url = os.environ.get("QA_SEARCH_URL")
    if not url:
        raise RuntimeError("QA_SEARCH_URL is not set: start benchmarks/agents/search_service.py's SearchService")
    tools = _request(f"{url}/tools")["tools"]
    messages = [{"role": "system", "content": ""}, {"role": "user", "content": sample["question"]}]
    for _ in range(int(os.environ.get("QA_AGENT_MAX_TURNS", "4"))):
        msg = client.chat.completions.create(model="policy", messages=messages, tools=tools).choices[0].message
        found = _ANSWER.search(msg.content or "")
        if found:
            return found.group(1).strip()
        if not msg.tool_calls:
            return (msg.content or "").strip()
        messages.append({"role": "assistant", "content": msg.content or "", "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls]})
        for c in msg.tool_calls:
            call = {"name": c.function.name, "arguments": json.loads(c.function.arguments)}
            messages.append({"role": "tool", "tool_call_id": c.id, "content": _request(f"{url}/call", call)["text"]})
    return ""  # no answer within the turns: scored as a wrong answer
