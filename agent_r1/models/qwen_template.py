"""A chat template that renders conversations exactly as Qwen2.5-Instruct's does.

Written here (not copied) so a model folder built offline with `agent-r1 build-model --like qwen2.5`
formats prompts token for token like the real checkpoint:
- tools are listed in the system turn inside `<tools></tools>`, one JSON schema a line, followed by
  the instruction to answer with `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`; with
  no system message, Qwen's default one is used;
- an assistant message's `tool_calls` are rendered after its content, each as such a block;
- consecutive `tool` messages share one user turn, each wrapped in `<tool_response>` tags.

Every tag uses `{%-`/`{{-` so the layout whitespace below never reaches the output (transformers
renders with trim_blocks and lstrip_blocks); newlines that belong to the output are string literals.
"""

QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

QWEN_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
QWEN_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call>"
)


def _jinja_str(text: str) -> str:
    """`text` as a Jinja string literal (Jinja reads Python-style escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def qwen_style_template(default_system: str, tools_header: str, tool_line: str, tools_footer: str) -> str:
    """Qwen2.5-Instruct's turns and tool-call syntax around a system turn's tools block of
    `tools_header`, one `tool_line` (a Jinja expression over `tool`) per tool, `tools_footer`."""
    return (
        """
{%- set first_is_system = messages and messages[0]['role'] == 'system' %}
{%- set system = messages[0]['content'] if first_is_system else """ + _jinja_str(default_system) + """ %}
{{- '<|im_start|>system\\n' + system }}
{%- if tools %}
    {{- """ + _jinja_str(tools_header) + """ }}
    {%- for tool in tools %}
        {{- '\\n' + """ + tool_line + """ }}
    {%- endfor %}
    {{- """ + _jinja_str(tools_footer) + """ }}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- for message in messages %}
    {%- set role = message['role'] %}
    {%- if role == 'system' and loop.first %}
    {%- elif role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- elif role == 'assistant' and message.get('tool_calls') %}
        {{- '<|im_start|>assistant' }}
        {%- if message['content'] %}
            {{- '\\n' + message['content'] }}
        {%- endif %}
        {%- for call in message['tool_calls'] %}
            {%- set fn = call['function'] if call['function'] is defined else call %}
            {{- '\\n<tool_call>\\n{"name": "' + fn['name'] + '", "arguments": ' + (fn['arguments'] | tojson) }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>' + role + '\\n' + message['content'] + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
    ).strip()


QWEN25_TEMPLATE = qwen_style_template(QWEN_DEFAULT_SYSTEM, QWEN_TOOLS_HEADER, "(tool | tojson)", QWEN_TOOLS_FOOTER)
