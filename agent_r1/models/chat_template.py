"""The chat template written for locally built models (ChatML, as Qwen2.5 uses).

Tools are listed in the system turn; `tool` messages are rendered as a user turn holding
`<tool_response>` blocks, as Qwen2.5's own template does. transformers renders with trim_blocks,
which eats a newline right after a block tag: such newlines are written as `{{ '\\n' }}`.
"""

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
