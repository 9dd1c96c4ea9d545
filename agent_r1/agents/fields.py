"""What the endpoint does with each field of a chat-completions request: nothing is dropped unsaid.

Every top-level field an agent may send is in `FIELDS`, with a check that returns why the endpoint
cannot honour the value given (the request is then refused with a 400 naming the field, so the
`openai` client raises `BadRequestError` with the reason) or None when it can. A field not listed is
refused too: an agent that relies on something the endpoint does not know hears so at once, rather
than training on a behaviour it did not ask for.

- read by `parse_request` (protocol.py): model, messages, tools, tool_choice (auto | none), max_tokens,
  max_completion_tokens, stop, n (1), stream (Server-Sent Events: streaming.py), stream_options
  (include_usage; include_obfuscation is accepted and writes no padding), logprobs, top_logprobs (0);
- the run's (read, then overridden, and listed in the record's `info["ignored"]`): temperature, top_p,
  seed, presence_penalty, frequency_penalty, logit_bias: the trainer scores tokens at the run's
  sampling distribution, so a call sampled at another one would not be trainable;
- bookkeeping that changes nothing sampled: user, metadata, store, service_tier, prompt_cache_key,
  safety_identifier;
- accepted only at the value that changes nothing: response_format text, parallel_tool_calls true,
  modalities ["text"];
- refused: tool_choice required or a named function (sampling is not constrained: the policy's
  own choice is what is trained), legacy functions / function_call (send tools / tool_choice),
  audio, prediction, web_search_options, reasoning_effort, verbosity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any], "str | None"]  # the value -> why it cannot be honoured, or None

RUN_DECIDES = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty", "logit_bias")


def _any(value: Any) -> str | None:
    return None


def _tool_choice(value: Any) -> str | None:
    if value in (None, "auto", "none"):
        return None
    return (f"tool_choice={value!r} is not supported: the endpoint does not constrain what the policy samples "
            "(the trained tokens are its own choice); use 'auto' (or 'none' to take any call as text)")


def _response_format(value: Any) -> str | None:
    if value is None or (isinstance(value, dict) and value.get("type", "text") == "text"):
        return None
    kind = value.get("type") if isinstance(value, dict) else value
    return (f"response_format type {kind!r} is not supported: sampling is not constrained to a format; "
            "omit it (or send {'type': 'text'}) and parse the reply yourself")


def _parallel(value: Any) -> str | None:
    if value is None or value is True:  # not `in`: 1 == True
        return None
    return "parallel_tool_calls=false is not supported: the policy may write several calls in one reply"


def _only(*allowed: Any, why: str) -> Check:
    """None and the `allowed` values (==) pass; any other is refused with `why` ({value!r}: the value)."""
    return lambda value: None if value is None or value in allowed else why.format(value=value)


def _zero(why: str) -> Check:
    """top_logprobs: None or the integer 0 pass (false is no number)."""
    return lambda value: None if value is None or (type(value) is int and value == 0) else why.format(value=value)


def _refused(why: str) -> Check:
    return lambda value: None if value is None else why


FIELDS: dict[str, Check] = {
    **{k: _any for k in ("model", "messages", "tools", "max_tokens", "max_completion_tokens", "stop", "n",
                         "stream", "stream_options", "logprobs", *RUN_DECIDES)},  # parse_request checks them
    **{k: _any for k in ("user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier")},
    "tool_choice": _tool_choice,
    "top_logprobs": _zero("top_logprobs={value!r} is not supported: the engine returns the sampled token's log-prob "
                          "only; send logprobs=true with top_logprobs 0 or omitted"),
    "response_format": _response_format,
    "parallel_tool_calls": _parallel,
    "modalities": _only(["text"], why="modalities={value!r}: this endpoint writes text only"),
    "functions": _refused("the legacy functions field is not supported: send the same schemas as "
                          "tools=[{'type': 'function', 'function': ...}]"),
    "function_call": _refused("the legacy function_call field is not supported: use tool_choice"),
    "audio": _refused("audio output is not supported: this endpoint writes text only"),
    "prediction": _refused("predicted outputs are not supported"),
    "web_search_options": _refused("web search is not supported: give the agent a search tool"),
    "reasoning_effort": _refused("reasoning_effort is not supported: the policy's sampling is the run's"),
    "verbosity": _refused("verbosity is not supported: the policy's sampling is the run's"),
}


def first_refusal(body: dict[str, Any], registry: dict[str, Check], route: str, source: str) -> tuple[str, str] | None:
    """(field, why) of the first field of `body` that `registry` cannot honour, or None."""
    for key, value in body.items():
        check = registry.get(key)
        if check is None:
            return key, (f"unsupported field {key!r}: {route} reads {sorted(registry)} "
                         f"({source} says what it does with each)")
        why = check(value)
        if why is not None:
            return key, why
    return None


def refusal(body: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) of the first chat-completions field the endpoint cannot honour, or None."""
    return first_refusal(body, FIELDS, "this endpoint", "agent_r1/agents/fields.py")
