"""The SFT warm start of an `env.kind: openai_agent` run (`agent-r1 sft`, `train.init_from: sft`): the
built-in env's chat recipe for the same task, its demos the agent's own sessions played through the
endpoint (training/agent_demos.py), keyed by that recipe and the agent, so a run of the same agent finds it."""

from __future__ import annotations

import json

from agent_r1.config import load_config
from agent_r1.runs.lineage import hash_json
from tests.pipeline_helpers import unpinned_micro

AGENT = {"env.kind": "openai_agent", "env.agent": "examples.qa_agent:agent"}
# the built-in env's settings that make the same warm start (benchmarks/endpoint_rows.py CHAT_RECIPE's)
BUILTIN_CHAT = {"env.format": "hermes", "sft.demo_style": "chat", "model.chat_template": "qwen2.5-brief"}


def _cfg(tmp_path, **extra):
    return load_config(None, unpinned_micro(tmp_path, **{"sft.steps": 2, **extra}))


def _key(cfg) -> str:
    from agent_r1.runs.assembly import ensure_data
    from agent_r1.runs.run import Run
    from agent_r1.runs.warm_start import ingredients

    data_dir = ensure_data(cfg)
    return hash_json(ingredients(cfg, data_dir, Run(cfg).index_dir))


def test_agent_key_is_its_agent_and_the_builtin_chat_recipe(tmp_path):
    """Keys hold what changes the demos and the SFT: the built-in chat recipe's settings and, as the demos
    are the agent's own sessions, which agent played them; not the keys only the RL part reads."""
    agent = _key(_cfg(tmp_path, **AGENT))
    assert agent != _key(_cfg(tmp_path, **BUILTIN_CHAT))  # the built-in env's demos are other demos
    assert agent == _key(_cfg(tmp_path, **AGENT, **{"env.agent_concurrency": 3, "env.agent_timeout_s": 9.0,
                                                     "env.format": "tag"}))
    assert agent != _key(_cfg(tmp_path, **AGENT, **{"sft.lr": 1e-3}))
    assert agent != _key(_cfg(tmp_path, **{**AGENT, "env.agent": "benchmarks.agents.qa_search_agent:agent"}))
    base = _key(_cfg(tmp_path))
    assert base == _key(_cfg(tmp_path, **{"env.agent_concurrency": 3}))
    assert base != agent


def test_agent_warm_start_is_made_once_then_found(tmp_path):
    from transformers import AutoTokenizer

    from agent_r1.runs.warm_start import ensure_warm_start

    said: list[str] = []
    made = ensure_warm_start(_cfg(tmp_path, **AGENT), log=said.append)
    assert not made.reused and (made.model_dir / "model.safetensors").is_file()
    card = json.loads((made.dir / "warm_start.json").read_text())
    assert card["ingredients"]["env"]["kind"] == "tool" and card["ingredients"]["env"]["format"] == "hermes"
    assert card["ingredients"]["sft"]["demo_style"] == "chat"
    assert card["ingredients"]["agent"] == AGENT["env.agent"] and card["ingredients"]["agent_source"]
    assert any("env.format" in line for line in said), said  # the run is told what its warm start changes
    # the warm start's template renders the tool calls the agent's history sends back
    tok = AutoTokenizer.from_pretrained(str(made.model_dir))
    call = {"type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}
    text = tok.apply_chat_template([{"role": "user", "content": "q"},
                                    {"role": "assistant", "content": "", "tool_calls": [call]}], tokenize=False)
    assert '"search"' in text
    found = ensure_warm_start(_cfg(tmp_path, **AGENT, **{"env.agent_concurrency": 2}), log=lambda _: None)
    assert found.reused and found.hash == made.hash


def test_agent_sft_command_trains(tmp_path):
    """`agent-r1 sft` under openai_agent: the agent's own sessions as demos, not a crash."""
    from agent_r1.runs.warm_start import run_sft

    cfg = _cfg(tmp_path, **AGENT, **{"sft.out_dir": str(tmp_path / "sft")})
    assert run_sft(cfg) == tmp_path / "sft" / "model"
    assert (tmp_path / "sft" / "model" / "model.safetensors").is_file()


def test_agent_warm_start_with_a_template_that_drops_tool_calls_is_refused_naming_the_key(tmp_path):
    """chat demos need the template to write the calls: named chatml is refused before any SFT step."""
    import pytest

    from agent_r1.runs.warm_start import run_sft

    cfg = _cfg(tmp_path, **AGENT, **{"model.chat_template": "chatml", "sft.out_dir": str(tmp_path / "sft")})
    with pytest.raises(ValueError, match=r"env\.kind=openai_agent.*model\.chat_template='chatml'"):
        run_sft(cfg)
    assert not (tmp_path / "sft" / "model").exists()


def test_builtin_env_keys_its_warm_start_with_its_own_env(tmp_path):
    """The built-in env's warm-start keys stay as they were: its SFT config is the run's own."""
    from agent_r1.runs.assembly import ensure_data
    from agent_r1.runs.run import Run
    from agent_r1.runs.warm_start import ingredients

    cfg = _cfg(tmp_path, **{"env.format": "hermes"})
    made_of = ingredients(cfg, ensure_data(cfg), Run(cfg).index_dir)
    assert made_of["env"] == cfg.to_dict()["env"]
