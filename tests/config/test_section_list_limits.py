"""Numbers inside lists of config sections (`env.mcp_servers`) are held to their ranges like any
other key: a NaN or infinite timeout would make a wait never end, or end at once."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from agent_r1.config import LIMITS, ExperimentConfig, load_config, parse_overrides
from agent_r1.tools.mcp_tools import McpServerConfig


def _server(**numbers) -> dict:
    return {"name": "calc", "command": "true", **numbers}


@pytest.mark.parametrize("key, value, allowed", [
    ("connect_timeout_s", math.nan, "(0, 86400]"), ("connect_timeout_s", math.inf, "(0, 86400]"),
    ("connect_timeout_s", 1e12, "(0, 86400]"), ("connect_timeout_s", 0, "(0, 86400]"),
    ("timeout_s", math.nan, "[0, 86400]"), ("timeout_s", -math.inf, "[0, 86400]"), ("timeout_s", -1, "[0, 86400]"),
])
def test_numbers_of_each_mcp_server_are_range_checked(key, value, allowed):
    with pytest.raises(ValueError) as err:
        load_config(None, {"env.mcp_servers": [_server(), _server(**{key: value})]})
    message = str(err.value)
    assert f"env.mcp_servers[1]" in message and key in message and allowed in message, message


@pytest.mark.parametrize("text", [".nan", ".inf", "nan", "inf", "-inf", "1e400"])
def test_a_written_nan_or_infinity_is_refused(text):
    overrides = parse_overrides([f"env.mcp_servers=[{{name: calc, command: 'true', connect_timeout_s: {text}}}]"])
    with pytest.raises(ValueError, match=r"env\.mcp_servers\[0\].*connect_timeout_s"):
        load_config(None, overrides)


def test_a_server_built_in_code_refuses_a_nan_timeout():
    with pytest.raises(ValueError, match="connect_timeout_s"):
        McpServerConfig(name="calc", command="true", connect_timeout_s=math.nan)
    with pytest.raises(ValueError, match="timeout_s"):
        McpServerConfig(name="calc", command="true", timeout_s=math.inf)


def test_sane_servers_load():
    cfg = load_config(None, {"env.mcp_servers": [_server(connect_timeout_s=5, timeout_s=2.5), _server()]})
    assert [s.connect_timeout_s for s in cfg.env.mcp_servers] == [5.0, 30.0]


def _list_sections(cls: type, section: str = "") -> typing.Iterator[tuple[str, type]]:
    """(section, element class) of every list-of-sections key in the config tree."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint, where = hints[f.name], f"{section}.{f.name}".lstrip(".")
        if dataclasses.is_dataclass(hint):
            yield from _list_sections(hint, where)
        elif typing.get_origin(hint) in (list, tuple):
            for arg in typing.get_args(hint):
                if dataclasses.is_dataclass(arg):
                    yield where, arg


def test_every_number_in_a_list_of_sections_has_a_bounded_range():
    found = list(_list_sections(ExperimentConfig))
    assert ("env.mcp_servers", McpServerConfig) in found
    for section, cls in found:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] in (int, float):
                rng = LIMITS.get(section, {}).get(f.name)
                assert rng is not None and math.isfinite(rng.hi), f"{section}[].{f.name} has no bounded range"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1.0, math.nan], {"deep": math.inf}])
def test_a_non_finite_number_inside_a_mapping_is_refused(value):
    """env.tool_args reaches tool factories as keyword arguments: a NaN there is a NaN in the tool."""
    with pytest.raises(ValueError, match=r"env\.tool_args.*calculator.*must be finite"):
        load_config(None, {"env.tool_args": {"calculator": {"limit": value}}})
    load_config(None, {"env.tool_args": {"calculator": {"limit": 3.5, "names": ["a"], "deep": {"x": 1}}}})
