"""Chat demos copy a value's token ids from where the context last wrote it (training/demos.py,
`copy_spelling`): a number the calculator returned comes back on a line of its own
("<tool_response>\\n1012\\n"), and byte-level BPE gives "1012" and " 1012" other ids. A demo that spaces
every value teaches the warm start a second spelling of every result instead of copying it, which the
outside arithmetic agent's warm start then never learns (benchmarks/outside_agent.py)."""

from __future__ import annotations

import copy

import pytest

from agent_r1.config import load_config
from agent_r1.envs.factory import make_env_factory
from agent_r1.models.chat_template import CHAT_TEMPLATES
from agent_r1.rollout.chat import ChatCodec
from agent_r1.training.demos import build_demos, copy_spelling

ROW = {"id": "a0", "question": "Noah has 23 bags of 44 coins each and 17 loose coins. How many coins does Noah have?",
       "answers": ["1029"], "type": "mul_add", "plan": ["44 * 23", "1012 + 17"],
       "env": {"tools": ["calculator"], "reward": {"metric": "numeric"}}}


def _contains(seq: list[int], part: list[int]) -> bool:
    return any(seq[i:i + len(part)] == part for i in range(len(seq) - len(part) + 1))


@pytest.fixture
def brief_tok(tiny_model):
    tok = copy.deepcopy(tiny_model[1])
    tok.chat_template = CHAT_TEMPLATES["qwen2.5-brief"]
    return tok


def test_copy_spelling_follows_the_latest_occurrence():
    assert copy_spelling("44 * 23", "has 23 bags of 44 coins") == " 44 * 23"  # inside a sentence: spaced
    assert copy_spelling("750 / 10", "user\n750 stickers among 10") == "750 / 10"  # opens the question: bare
    assert copy_spelling("1012", "of 44 <tool_response>\n1012\n</tool_response>") == "1012"  # a tool result
    assert copy_spelling("1012", "made 1012 then <tool_response>\n1012\n") == "1012"  # the latest one counts
    assert copy_spelling("101", "<tool_response>\n1012\n") == " 101"  # a whole word only; absent: spaced
    assert copy_spelling("Velmora", "is a city in Velmora.") == " Velmora"


def test_chat_demo_copies_a_tool_result_as_its_ids(brief_tok):
    cfg = load_config(None, {"env.format": "hermes", "env.tools": ["calculator"], "env.format_instructions": False})
    codec = ChatCodec(brief_tok)
    (demo,) = build_demos([ROW], make_env_factory(cfg, None), codec, "hermes", 0.0, 0, 96, "chat")
    assert len(demo.turns) == 3
    first, second, answer = demo.turns
    result = codec.encode("1012")
    assert _contains(first.observation_ids, result)  # "<tool_response>\n1012\n": the bare spelling
    assert _contains(second.action_ids, result)  # the next call copies those ids
    assert '"expression": "1012 + 17"' in second.action_text
    assert '"expression": " 44 * 23"' in first.action_text  # from inside the question: spaced, as there
    assert _contains(second.observation_ids, codec.encode("1029"))
    assert _contains(answer.action_ids, codec.encode("1029"))
    assert answer.action_text.startswith("<answer>1029</answer>")


def test_a_chat_warm_start_is_keyed_by_its_spelling(tmp_path):
    """A chat warm start made before the spelling (every value spaced) is another warm start: its key differs;
    the built-in env style's demos did not change, nor do their keys."""
    from agent_r1.runs.assembly import ensure_data
    from agent_r1.runs.run import Run
    from agent_r1.runs.warm_start import ingredients
    from tests.pipeline_helpers import unpinned_micro

    def made_of(**extra):
        cfg = load_config(None, unpinned_micro(tmp_path, **{"sft.steps": 2, **extra}))
        return ingredients(cfg, ensure_data(cfg), Run(cfg).index_dir)

    chat = made_of(**{"env.format": "hermes", "sft.demo_style": "chat", "model.chat_template": "qwen2.5-brief"})
    assert chat["chat_spelling"] == "copy"
    assert "chat_spelling" not in made_of(**{"env.format": "hermes"})
