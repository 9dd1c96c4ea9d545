"""The chat template written for locally built models (ChatML, as Qwen2.5 uses).

Tools are listed in the system turn; `tool` messages are rendered as a user turn holding
`<tool_response>` blocks, as Qwen2.5's own template does. transformers renders with trim_blocks,
which eats a newline right after a block tag: such newlines are written as `{{ '\\n' }}`.
"""

from agent_r1.registry import NoTraits, Registry

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "<|im_start|>system\n{{ message['content'] }}"
    "{% if tools %}{{ '\\n# Tools' }}{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% elif message['role'] == 'tool' %}"
    "<|im_start|>user\n{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _qwen25() -> str:
    from agent_r1.models.qwen_template import QWEN25_TEMPLATE

    return QWEN25_TEMPLATE


def _qwen25_brief() -> str:
    """Qwen2.5's turns, tool calls and tool responses, token for token, but a tools block of the tools'
    names only (no default system message, no prose, no schemas). For a small model trained from
    scratch, where Qwen's tools block is most of every prompt: behind it, 1,000 SFT steps did not teach
    the 4-layer chat recipe to copy the question's name into its search; with this block, 2,000 did
    (docs/results.md, "the QA task through the OpenAI endpoint")."""
    from agent_r1.models.qwen_template import qwen_style_template

    name = "(tool['function']['name'] if tool['function'] is defined else tool['name'])"
    return qwen_style_template("", "\n<tools>", name, "\n</tools>")


#: model.chat_template -> the template a locally built tokenizer gets
CHAT_TEMPLATES: Registry[str, NoTraits] = Registry(
    "chat template", key="model.chat_template", where="agent_r1.models.chat_template.CHAT_TEMPLATES")
CHAT_TEMPLATES.register("chatml", CHATML_TEMPLATE)
CHAT_TEMPLATES.register("qwen2.5", _qwen25())
CHAT_TEMPLATES.register("qwen2.5-brief", _qwen25_brief())


def template_texts(name: str) -> list[str]:
    """Text a template writes around messages (beyond the ChatML glue), for the tokenizer's training texts."""
    if name != "qwen2.5":
        return []
    from agent_r1.models.qwen_template import QWEN_DEFAULT_SYSTEM, QWEN_TOOLS_FOOTER, QWEN_TOOLS_HEADER

    return [QWEN_DEFAULT_SYSTEM + QWEN_TOOLS_HEADER + QWEN_TOOLS_FOOTER]
