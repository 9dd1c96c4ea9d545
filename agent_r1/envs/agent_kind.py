"""What `env.kind: openai_agent` asks of the config, the rows and the SFT warm start.

The agent function brings its own tools: it sends their schemas in its requests and runs the calls
itself, so the run's `env.tools` are never offered to it, and a row may name tools the run does not
list (the run's MCP servers are handed to an agent with a `tools` parameter: agents/agent_tools.py).
The warm start is made with the built-in env's chat settings for the same task (chat-template turns,
hermes `<tool_call>` blocks), its demos the agent's own sessions over a scripted policy
(training/agent_demos.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

# A locally built model's template when params.yaml names none: it renders an assistant turn's
# tool_calls, so an agent's re-sent history is the text the policy sampled (chatml drops them: every
# tool round trip would drift into a new step)
TOOL_CALL_TEMPLATE = "qwen2.5-brief"

def agent_defaults(tree: dict[str, Any]) -> dict[str, Any]:
    """{dotted key: value} this kind sets where params.yaml and the overrides leave the key out."""
    model = tree.get("model")
    model = model if isinstance(model, dict) else {}
    if model.get("name_or_path") or "chat_template" in model:  # a model folder brings its own template
        return {}
    return {"model.chat_template": TOOL_CALL_TEMPLATE}


def demo_tools(rows: list[dict[str, Any]], run_tools: list[str]) -> list[str]:
    """The tools the warm start's demos call: those the rows name (in the order first named) when
    every row names its own, else env.tools with the rows' others after them."""
    named = [(r.get("env") or {}).get("tools") for r in rows]
    own = list(dict.fromkeys(t for tools in named if tools for t in tools))
    if named and all(named):
        return own
    return list(dict.fromkeys([*run_tools, *own]))


def renders_tool_calls(template: str) -> bool:
    """Whether a chat template writes an assistant message's tool_calls (chatml writes its text alone)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    call = {"type": "function", "function": {"name": "probe_tool_name", "arguments": {}}}
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    text = ImmutableSandboxedEnvironment().from_string(template).render(messages=[message], tools=None)
    return "probe_tool_name" in text


def agent_warm_start(cfg: Any, rows: Callable[[], list[dict[str, Any]]]) -> Any:
    """The built-in env's config whose SFT makes this kind's warm start (see the module's docstring). A
    locally built model's template must write tool calls: the demos are its assistant turns."""
    from agent_r1.models.chat_template import CHAT_TEMPLATES

    name = cfg.model.chat_template
    if not cfg.model.name_or_path and not renders_tool_calls(CHAT_TEMPLATES[name]):
        raise ValueError(f"env.kind=openai_agent: the warm start's demos are assistant turns with tool calls as "
                         f"the chat template writes them, and model.chat_template={name!r} drops tool calls; use "
                         f"{TOOL_CALL_TEMPLATE} (the default under this kind) or qwen2.5, or a model folder")
    env = replace(cfg.env, kind="tool", format="hermes", tools=demo_tools(rows(), list(cfg.env.tools)))
    return replace(cfg, env=env, sft=replace(cfg.sft, demo_style="chat"))
