"""A `--like qwen2.5` model folder built once per test session (the vocabulary conversion takes
seconds), for every test that needs a hub-style stand-in for Qwen2.5."""

from __future__ import annotations

from pathlib import Path

import pytest

QWEN_SPECIAL_IDS = {
    "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
    "<tool_call>": 151657, "</tool_call>": 151658,
}


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory) -> Path:
    """hidden 64, 2 layers, the real 151,936-row vocabulary: about 9.8M parameters, built through
    the CLI exactly as a user would."""
    from agent_r1.cli import main

    out = tmp_path_factory.mktemp("qwen_like") / "qwen2.5-tiny"
    assert main(["build-model", "--like", "qwen2.5", "--out", str(out), "--hidden-size", "64",
                 "--num-layers", "2"]) == 0
    return out
