"""Config hardening: every number range-checked with the key and the allowed range
in the message, list and dict elements type-checked, choices validated from the registries at load,
and YAML aliases refused in params files (a 7-deep alias bomb under env.tool_args made a 335 MB config).
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_r1.config import LIMITS, ExperimentConfig, load_config, parse_overrides

ABSURD = [  # (key, value, words the message must hold)
    ("rollout.top_k", -5, "[0, 1048576]"), ("search.timeout_s", -1, "(0, 86400]"), ("search.timeout_s", 0, "(0, 86400]"),
    ("rollout.temperature", -0.5, "[0, 100]"), ("rollout.top_p", 0.0, "(0, 1]"), ("rollout.top_p", 1.5, "(0, 1]"),
    ("train.checkpoint_every", 0, "[1, 1000000000]"), ("algo.clip_low", -0.1, "[0, 1)"), ("algo.clip_high", -1, "[0, 1000]"),
    ("algo.gamma", 0.0, "(0, 1]"), ("algo.lam", 1.5, "[0, 1]"), ("algo.kl_coef", -1, "[0, 1000000]"),
    ("algo.entropy_coef", -0.1, "[0, 1000000]"), ("algo.critic_lr", 0, "(0, 10]"), ("algo.dual_clip", 0.5, "(1, 1000000]"),
    ("algo.vf_clip", 0, "(0, 1000000]"), ("train.weight_decay", -1, "[0, 100]"), ("train.max_grad_norm", -1, "(0, 1000000]"),
    ("train.keep_checkpoints", -1, "[0, 1000000]"), ("train.eval_every", -1, "[0, 1000000000]"), ("train.eval_size", -3, "[0, 10000000]"),
    ("train.threads", -2, "[0, 4096]"), ("train.log_trajectories_every", -1, "[0, 1000000000]"),
    ("train.max_bad_updates", 0, "[1, 1000000]"), ("sft.steps", -1, "[0, 1000000000]"), ("sft.batch_size", 0, "[1, 1000000]"),
    ("sft.log_every", 0, "[1, 1000000000]"), ("sft.lr", float("nan"), "(0, 10]"), ("search.max_chars_per_doc", 0, "[1, 1000000]"),
    ("ray.max_restarts", -1, "[0, 1000000]"), ("ray.num_cpus", -4, "[0, 1000000]"), ("model.hidden_size", 0, "[1, 65536]"),
    ("model.num_heads", -2, "[1, 1024]"), ("model.vocab_size", 0, "[1, 1048576]"), ("data.n_people", 0, "[1, 10000000]"),
    ("seed", -1, "[0, 4294967295]"), ("env.max_calls_per_turn", 0, "[1, 256]"),
    ("reward.format_penalty", float("nan"), "finite"), ("reward.format_penalty", 1e308, "[-10, 0]"),
    ("reward.format_penalty", float("-inf"), "finite"), ("reward.valid_call_reward", 1e308, "[-10, 10]"),
    ("reward.max_process_reward", -1, "[0, 100]"), ("train.lr", float("inf"), "(0, 10]"),
]


@pytest.mark.parametrize("key, value, allowed", ABSURD, ids=[f"{k}={v}" for k, v, _ in ABSURD])
def test_absurd_values_fail_at_load_naming_key_and_range(key, value, allowed):
    with pytest.raises(ValueError) as err:
        load_config(None, {key: value})
    assert key in str(err.value) and allowed in str(err.value), str(err.value)


def _numeric_fields(cls: type, section: str = "") -> typing.Iterator[tuple[str, str, str]]:
    """(section, dotted key, field name) of every int/float field in the config tree."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            yield from _numeric_fields(hint, f"{section}.{f.name}".lstrip("."))
            continue
        args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        if any(a in (int, float) for a in args) and bool not in args:
            yield section, f"{section}.{f.name}".lstrip("."), f.name


NUMERIC = list(_numeric_fields(ExperimentConfig))


def test_every_number_of_every_config_dataclass_has_a_range():
    missing = [key for section, key, name in NUMERIC if name not in LIMITS.get(section, {})]
    assert not missing, f"numeric config keys without a range in config.LIMITS: {missing}"
    assert len(NUMERIC) >= 50
    unbounded = [key for section, key, name in NUMERIC if not math.isfinite(LIMITS[section][name].hi)]
    assert not unbounded, f"numeric config keys without a ceiling: {unbounded}"


@pytest.mark.parametrize("key, value", [("search.k", 10**12), ("search.k", 1e12), ("rollout.n_samples", 10**9),
                                        ("rollout.max_total_tokens", 10**12), ("train.prompts_per_iter", 10**12),
                                        ("model.hidden_size", 10**7), ("search.es_pool_size", 10**9)])
def test_numbers_past_what_one_machine_holds_are_refused_at_load(key, value):
    """A `search.k` of 1e12 would make tantivy ask for 16 TB and abort the process."""
    with pytest.raises(ValueError) as err:
        load_config(None, {key: value})
    assert key in str(err.value) and "in [" in str(err.value), str(err.value)


def test_the_search_command_and_every_backend_refuse_a_huge_k(tmp_path, capsys):
    from agent_r1.cli import main as cli_main
    from agent_r1.data.corpus import make_document
    from agent_r1.data.io import write_jsonl

    write_jsonl(tmp_path / "corpus.jsonl", [make_document("Karivo", "a river town")])
    assert cli_main(["index", "--corpus", str(tmp_path / "corpus.jsonl"), "--out", str(tmp_path / "idx")]) == 0
    capsys.readouterr()
    assert cli_main(["search", "--index", str(tmp_path / "idx"), "river", "-k", str(10**12)]) != 0
    assert "-k" in capsys.readouterr().err
    from agent_r1.retrieval.base import open_index

    retriever = open_index(tmp_path / "idx")
    try:
        with pytest.raises(ValueError, match="k must be in"):
            retriever.search(["river"], 10**12)
        assert retriever.search(["river"], 1000)[0][0].title == "Karivo"
    finally:
        retriever.close()


@settings(max_examples=250, deadline=None)
@given(field=st.sampled_from(NUMERIC), value=st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 10**30, -(10**30), -1, 0, 1, 0.5, -0.5, 2]))
def test_any_number_is_refused_naming_its_key_or_lands_in_range(field, value):
    section, key, name = field
    try:
        cfg = load_config(None, {key: value})
    except ValueError as err:
        assert key in str(err), str(err)
        return
    got = cfg
    for part in key.split("."):
        got = getattr(got, part)
    assert math.isfinite(got) and LIMITS[section][name].contains(got)


def test_late_failures_fail_at_start_with_the_choices():
    from agent_r1.algos import AGG_MODES, KL_PENALTIES

    with pytest.raises(ValueError, match=re.escape("train.checkpoint_every")):
        load_config(None, {"train.checkpoint_every": 0})
    for key, choices in (("algo.loss_agg", AGG_MODES), ("algo.kl_kind", KL_PENALTIES)):
        with pytest.raises(ValueError) as err:
            load_config(None, {key: "token_mean"})
        assert key in str(err.value) and all(c in str(err.value) for c in choices), str(err.value)


@pytest.mark.parametrize("key, value, where", [
    ("data.question_types", ["bridge", {"x": 1}], "data.question_types[1]"),
    ("env.tools", ["search", ["calculator"]], "env.tools[1]"),
    ("env.tools", "search", "env.tools"),
    ("env.tool_args", {"search": 5}, "env.tool_args['search']"),
    ("env.tool_args", {"search": ["k", 3]}, "env.tool_args['search']"),
    ("env.tool_args", [1, 2], "env.tool_args"),
])
def test_list_and_dict_elements_are_type_checked(key, value, where):
    with pytest.raises(ValueError) as err:
        load_config(None, {key: value})
    assert where in str(err.value), str(err.value)


def test_elements_of_the_right_type_still_load():
    cfg = load_config(None, {"data.question_types": ["bridge"], "env.tools": ["search", "calculator"],
                             "env.tool_args": {"calculator": {"max_chars": 9}}})
    assert cfg.data.question_types == ("bridge",) and cfg.env.tool_args == {"calculator": {"max_chars": 9}}


def _alias_bomb(depth: int = 7) -> str:
    lines = ["env:", "  tools: [search]", "  tool_args:", '    search: {a0: &a0 ["lol", "lol", "lol", "lol", "lol"]}']
    for i in range(1, depth + 1):
        prev = f"*a{i - 1}"
        lines.append(f"    x{i}: &a{i} [{', '.join([prev] * 9)}]")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_is_refused_at_load(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(_alias_bomb(7))
    with pytest.raises(ValueError) as err:
        load_config(path)
    msg = str(err.value)
    assert f"{path}:5" in msg and "alias" in msg, msg  # the first alias is on line 5


def test_any_yaml_alias_is_refused_in_params_and_overrides(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train: &t {lr: 0.001}\nsft: {lr: 0.002}\nx: *t\n")
    with pytest.raises(ValueError, match="alias"):
        load_config(path)
    with pytest.raises(ValueError, match="alias"):
        parse_overrides(["env.tool_args={a: &x [1], b: *x}"])
