"""Checks a loaded model folder must pass before a run starts, each a clear error naming the
folder and the fix instead of a template error deep inside the first rollout.

`check_chat_template(tokenizer, source, env_format)` belongs right after the policy is loaded
from `train.init_from` / `model.name_or_path` (runs/assembly.py `build_policy`) and the model
is loaded for evaluation (evaluation/harness.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PROBE_TOOL = {"type": "function", "function": {
    "name": "agent_r1_probe_tool", "description": "probe",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
_TOOL_TURN = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
              {"role": "assistant", "content": "a"}, {"role": "tool", "content": "o"}]
_BUILD_HINT = ("build a folder with one (`agent-r1 build-model --like qwen2.5 --out DIR`), or point "
               "train.init_from / model.name_or_path at an instruct model's folder")


def _lists_tools(tokenizer: Any, source: str, env_format: str) -> None:
    # hermes prompts say "the tools listed above": a template that drops `tools` hides them
    # with a system turn, as the env always sends one (some templates list tools only inside it)
    text = tokenizer.apply_chat_template([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
                                         tools=[_PROBE_TOOL],
                                         tokenize=False, add_generation_prompt=True)
    if "agent_r1_probe_tool" not in text:
        raise ValueError(f"the chat template of model folder {source!r} does not list `tools`, so with "
                         f"env.format={env_format} the model would never see the tool schemas; use a template "
                         f"that lists tools in the system turn (as Qwen2.5's does): {_BUILD_HINT}; "
                         "or use env.format=tag")


# extra requirements a tool-call format puts on the template, beyond rendering a conversation
FORMAT_TEMPLATE_CHECKS: dict[str, Callable[[Any, str, str], None]] = {"hermes": _lists_tools}


def check_chat_template(tokenizer: Any, source: str, env_format: str) -> None:
    """Raises ValueError unless the tokenizer's chat template can drive a run in `env_format`."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"model folder {source!r} has no chat template (chat_template.jinja or "
                         f"'chat_template' in tokenizer_config.json); env.format={env_format} builds prompts, "
                         f"tool lists and tool responses with it. Add one to the folder, or {_BUILD_HINT}")
    try:  # the rollout derives observation glue from a tool turn (rollout/chat.py)
        tokenizer.apply_chat_template(_TOOL_TURN, tokenize=False, add_generation_prompt=True)
    except Exception as err:  # jinja raises its own error types; all mean the same to the user
        raise ValueError(f"the chat template of model folder {source!r} cannot render a conversation with a "
                         f"`tool` message ({type(err).__name__}: {err}); the rollout needs one to wrap tool "
                         f"responses: {_BUILD_HINT}") from None
    extra = FORMAT_TEMPLATE_CHECKS.get(env_format)
    if extra is not None:
        extra(tokenizer, source, env_format)
