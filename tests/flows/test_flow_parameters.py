"""What a flow run's parameters may change: a caller of the Prefect API (anyone holding its
credential) may tune a run, never name code to import, a command to run, or where the serving
machine's credentials go; those keys stay in the params file on the serving machine."""

from __future__ import annotations

import pytest

from flows.steps import SERVING_MACHINE_ONLY, check_flow_parameters


def _sentinel_server(sentinel) -> list[dict]:
    return [{"name": "x", "command": "sh", "args": ["-c", f"touch {sentinel}"]}]


@pytest.mark.parametrize("overrides, key", [
    ({"env.mcp_servers": "SENTINEL"}, "env.mcp_servers"),
    ({"env": {"mcp_servers": "SENTINEL", "tools": ["x"]}}, "env.mcp_servers"),
    ({"env.mcp_servers.0.command": "sh"}, "env.mcp_servers"),
    ({"env.mcp_servers[0].command": "sh"}, "env.mcp_servers"),
    ({"env.agent": "os:system"}, "env.agent"),
    ({"env": {"kind": "openai_agent", "agent": "os:system"}}, "env.agent"),
    ({"env.tool_args": {"search": {"retriever": "x"}}}, "env.tool_args"),
    ({"search.url": "http://attacker.example:9200"}, "search.url"),
    ({"search": {"credentials_url": "http://attacker.example:9200"}}, "search.credentials_url"),
    ({"ray.address": "attacker.example:6379"}, "ray.address"),
])
def test_overrides_naming_code_commands_or_credential_targets_are_refused(tmp_path, overrides, key):
    sentinel = tmp_path / "ran"
    overrides = {k: (_sentinel_server(sentinel) if v == "SENTINEL" else v) for k, v in overrides.items()}
    for v in overrides.values():
        if isinstance(v, dict) and v.get("mcp_servers") == "SENTINEL":
            v["mcp_servers"] = _sentinel_server(sentinel)
    with pytest.raises(ValueError) as info:
        check_flow_parameters("params.yaml", overrides)
    message = str(info.value)
    assert f"'{key}'" in message and "params.yaml on the serving machine" in message
    assert not sentinel.exists()


def test_tuning_overrides_pass():
    check_flow_parameters("params.yaml", {"train.iterations": 5, "algo.adv_estimator": "rloo",
                                          "env": {"tools": ["search"], "max_calls_per_turn": 2},
                                          "search": {"k": 3}})
    check_flow_parameters("params.yaml", None)


def test_every_refused_key_is_a_config_key():
    from agent_r1.config import ExperimentConfig

    tree = ExperimentConfig().to_dict()
    for dotted in SERVING_MACHINE_ONLY:
        node = tree
        for part in dotted.split("."):
            assert part in node, dotted
            node = node[part]


def test_a_served_deployment_runs_only_its_own_params_file(tmp_path, monkeypatch):
    own = tmp_path / "served.yaml"
    own.write_text("seed: 0\n")
    other = tmp_path / "other.yaml"
    other.write_text("env:\n  agent: os:system\n")
    monkeypatch.setenv("AGENT_R1_SERVED_PARAMS", str(own))
    check_flow_parameters(str(own), {})
    with pytest.raises(ValueError, match="params") as info:
        check_flow_parameters(str(other), {})
    assert "served.yaml" in str(info.value)
    monkeypatch.delenv("AGENT_R1_SERVED_PARAMS")
    check_flow_parameters(str(other), {})  # run by hand (python -m flows.train_agent): the caller's own file


def test_the_flow_refuses_before_any_work(tmp_path, monkeypatch):
    """The flow function itself checks first: nothing opens, no command starts."""
    from flows.train_agent import train_agent

    sentinel = tmp_path / "ran"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="env.mcp_servers"):
        train_agent.fn(params="params.yaml", overrides={"env.mcp_servers": _sentinel_server(sentinel),
                                                        "env.tools": ["x"]}, dvc="off")
    assert not sentinel.exists()
