"""Secrets a config holds (an MCP server's environment, tokens in MCP URLs and arguments, an API key
in search.url) never reach MLflow params or tags, config.json or warm_start.json; the run itself
still gets the real values (a reloaded or resumed run connects with them)."""

from __future__ import annotations

import json
import stat

from agent_r1.config import load_config
from tests.mlflow_store import fresh_store

SECRETS = {"env": "mcpenv-SECRET-1a2b", "flag": "mcpflag-SECRET-3c4d", "inline": "mcpinline-SECRET-5e6f",
           "userinfo": "mcpuser-SECRET-7a8b", "query": "mcpquery-SECRET-9c0d", "es": "eskey-SECRET-1f2e",
           "tool": "toolarg-SECRET-3a4b"}


def _overrides() -> dict:
    return {
        "env.mcp_servers": [
            {"name": "local", "command": "python", "env": {"SRV_TOKEN": SECRETS["env"], "MODE": "fast"},
             "args": ["srv.py", "--api-key", SECRETS["flag"], f"--token={SECRETS['inline']}", "--port", "7"]},
            {"name": "remote", "transport": "http",
             "url": f"http://bot:{SECRETS['userinfo']}@127.0.0.1:9/mcp?token={SECRETS['query']}&region=eu"},
        ],
        "search.url": f"http://127.0.0.1:9200/?api_key={SECRETS['es']}",
        "env.tool_args": {"calculator": {"api_key": SECRETS["tool"], "precision": "high"}},
    }


def _assert_clean(text: str, where: str) -> None:
    for name, secret in SECRETS.items():
        assert secret not in text, f"{name} secret leaked into {where}"


def test_redact_config_hides_every_secret_and_keeps_the_rest():
    from agent_r1.redaction import redact_config, restore_secrets

    tree = load_config(None, _overrides()).to_dict()
    public, secrets = redact_config(tree)
    _assert_clean(json.dumps(public), "the redacted tree")
    local, remote = public["env"]["mcp_servers"]
    assert local["env"]["MODE"] == "***" and local["args"][:2] == ["srv.py", "--api-key"]
    assert local["args"][-2:] == ["--port", "7"] and local["args"][3] == "--token=***"
    assert "region=eu" in remote["url"] and "127.0.0.1:9/mcp" in remote["url"]
    assert public["env"]["tool_args"]["calculator"]["precision"] == "high"
    assert public["train"] == tree["train"]
    assert restore_secrets(public, secrets) == tree
    plain = load_config(None, {}).to_dict()
    assert redact_config(plain) == (plain, [])


def test_mlflow_params_hold_no_secret(tmp_path):
    from mlflow.tracking import MlflowClient

    from agent_r1.tracking import RunTracker

    tree = load_config(None, _overrides()).to_dict()
    uri = fresh_store(tmp_path)
    tracker = RunTracker("redact", experiment="redact", tracking_uri=uri, buffer_dir=tmp_path / "buffer", verbose=False)
    tracker.log_config(tree)
    tracker.child("train").log_config(tree)
    report = tracker.close()
    assert report["pending"] == 0 and report["rejected"] == 0
    run = MlflowClient(tracking_uri=uri).get_run(tracker.run_id)
    assert "env.mcp_servers" in run.data.params and "search.url" in run.data.params
    _assert_clean(json.dumps({**run.data.params, **run.data.tags}), "MLflow params/tags")
    _assert_clean((tmp_path / "mlflow.db").read_bytes().decode("latin-1"), "the MLflow store")


def test_the_flow_overrides_tag_holds_no_secret():
    from flows.steps import overrides_tag

    text = overrides_tag(_overrides())
    _assert_clean(text, "the overrides tag")
    assert json.loads(text)["search.url"].startswith("http://127.0.0.1:9200/?api_key=")


def test_config_json_holds_no_secret_and_the_run_reloads_the_real_values(tmp_path):
    from agent_r1.runs.folders import config_for_resume
    from agent_r1.runs.run import Run

    cfg = load_config(None, {**_overrides(), "train.out_dir": str(tmp_path / "run"),
                             "train.runs_dir": str(tmp_path / "runs")})
    run = Run.open(cfg, resolve_start=False, log=lambda *a: None)
    _assert_clean((run.folder / "config.json").read_text(), "config.json")
    private = [p for p in run.folder.iterdir() if p.name != "config.json" and p.suffix == ".json"
               and any(s in p.read_text() for s in SECRETS.values())]
    assert len(private) == 1 and stat.S_IMODE(private[0].stat().st_mode) == 0o600, private
    assert Run.load(run.folder).cfg == cfg
    assert Run.load(run.folder).cfg.env.mcp_servers[0].env["SRV_TOKEN"] == SECRETS["env"]
    assert config_for_resume(str(run.folder), str(tmp_path / "runs")).env.mcp_servers == cfg.env.mcp_servers
    from agent_r1.runs.folders import RUN_ARTIFACTS

    assert private[0].name not in RUN_ARTIFACTS


def test_the_warm_start_card_holds_no_secret():
    from agent_r1.runs.warm_start import card_text

    tree = load_config(None, _overrides()).to_dict()
    text = card_text("abc123", {"env": tree["env"], "seed": 0}, 1.5)
    _assert_clean(text, "warm_start.json")
    assert json.loads(text)["hash"] == "abc123"


def test_a_run_moved_aside_keeps_its_secrets(tmp_path):
    """A fresh start in a folder with history moves the old run to previous/<time>/, itself a run
    folder that `--resume` continues: its secrets go with it."""
    from agent_r1.runs.run import Run

    cfg = load_config(None, {**_overrides(), "train.out_dir": str(tmp_path / "run"),
                             "train.runs_dir": str(tmp_path / "runs")})
    run = Run.open(cfg, resolve_start=False, log=lambda *a: None)
    (run.folder / "metrics.jsonl").write_text('{"step": 1}\n')
    Run.open(cfg, resolve_start=False, log=lambda *a: None)  # starts over: the first run is set aside
    (previous,) = (run.folder / "previous").iterdir()
    assert Run.load(previous).cfg.env.mcp_servers[0].env["SRV_TOKEN"] == SECRETS["env"]
    assert Run.load(run.folder).cfg.env.mcp_servers[0].env["SRV_TOKEN"] == SECRETS["env"]
