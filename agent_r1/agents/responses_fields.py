"""What the endpoint does with each field of a Responses API request (POST /v1/responses).

The same policy as fields.py for chat completions: every top-level field is listed with a check that
returns why the endpoint cannot honour the value (a 400 naming the field) or None; a field not listed
is refused too. The subset is what the OpenAI Agents SDK sends by default (`OpenAIResponsesModel`):

- mapped onto the chat path (responses_api.py): model, input, instructions, tools (function tools;
  `strict` accepted, not enforced: sampling is not constrained, a call whose arguments do not parse
  comes back as text), tool_choice (auto | none), parallel_tool_calls (true), max_output_tokens;
  stream (the finished response sent as its event stream: responses_stream.py), stream_options
  (include_obfuscation, accepted; no padding is written);
- the run's (read, overridden, listed in the record's `info["ignored"]`): temperature, top_p;
- bookkeeping that changes nothing sampled: user, metadata, store, service_tier, prompt_cache_key,
  prompt_cache_retention, safety_identifier;
- accepted only at the value that changes nothing: include [] (the SDK sends an empty list),
  truncation "disabled", text {"format": {"type": "text"}}, reasoning null, background false;
- refused: previous_response_id and conversation (nothing is stored: send the whole input, as the
  Agents SDK does by default), prompt (stored prompts), top_logprobs, max_tool_calls, and every other
  value of the fields above.
"""

from __future__ import annotations

from typing import Any

from agent_r1.agents.fields import Check, _any, _only, _parallel, _refused, _tool_choice, _zero, first_refusal

RUN_DECIDES = ("temperature", "top_p")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    fmt = value.get("format") if isinstance(value, dict) else None
    if isinstance(value, dict) and set(value) <= {"format"} and (fmt is None or fmt.get("type", "text") == "text"):
        return None
    return (f"text={value!r} is not supported: sampling is not constrained to a format and verbosity is the "
            "policy's; omit it (or send {'format': {'type': 'text'}}) and parse the reply yourself")


def _reasoning(value: Any) -> str | None:
    if value in (None, {}) or (isinstance(value, dict) and all(v is None for v in value.values())):
        return None
    return f"reasoning={value!r} is not supported: the policy's sampling is the run's"


def _false(name: str, why: str) -> Check:
    return lambda value: None if value is None or value is False else f"{name}={value!r} is not supported: {why}"


def _stream_options(value: Any) -> str | None:
    if value is None or (isinstance(value, dict) and set(value) <= {"include_obfuscation"}):
        return None
    return f"stream_options={value!r}: /v1/responses reads include_obfuscation only (and writes no padding)"


FIELDS: dict[str, Check] = {
    **{k: _any for k in ("model", "input", "instructions", "tools", "max_output_tokens", "stream", *RUN_DECIDES)},
    **{k: _any for k in ("user", "metadata", "store", "service_tier", "prompt_cache_key",
                         "prompt_cache_retention", "safety_identifier")},
    "tool_choice": _tool_choice,
    "parallel_tool_calls": _parallel,
    "include": _only([], why="include={value!r} is not supported: the endpoint returns no extra output data "
                             "(logprobs, reasoning or tool-call outputs); send include=[] or omit it"),
    "truncation": _only("disabled", why="truncation={value!r} is not supported: the endpoint never drops input "
                                        "items (a prompt longer than the run allows is a 400); send 'disabled' or omit it"),
    "text": _text,
    "reasoning": _reasoning,
    "background": _false("background", "the call is answered when it is done"),
    "stream_options": _stream_options,
    "top_logprobs": _zero("top_logprobs={value!r} is not supported on /v1/responses; use chat completions with "
                          "logprobs=true"),
    "previous_response_id": _refused("previous_response_id is not supported: the endpoint stores no responses; "
                                     "send the whole conversation as input"),
    "conversation": _refused("conversation is not supported: the endpoint stores no conversations; send the "
                             "whole conversation as input"),
    "prompt": _refused("stored prompts are not supported: send instructions and input"),
    "max_tool_calls": _refused("max_tool_calls is not supported: the policy decides how many calls it writes"),
}


def refusal(body: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) of the first field the endpoint cannot honour, or None."""
    return first_refusal(body, FIELDS, "/v1/responses", "agent_r1/agents/responses_fields.py")
