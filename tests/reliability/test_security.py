"""Security: model text is never code, shell or query syntax; paths stay in their folder;
credentials from the environment never reach MLflow or printed output; services bind to 127.0.0.1.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import socket
from types import SimpleNamespace

import pytest

from agent_r1.tools.calculator import CalculatorError, evaluate
from tests.es_fixture import REPO_ROOT, es_server  # noqa: F401
from tests.mlflow_store import fresh_store

PACKAGE = REPO_ROOT / "agent_r1"
API_KEY, USER, PASSWORD = "sk-agentr1-APIKEY-7f3e9c", "agentr1-user-51c2", "pw-agentr1-SECRET-9d8b"
SECRETS = (API_KEY, PASSWORD)

CODE = [  # each would act on the machine if anything evaluated it
    "__import__('os').system('touch {sentinel}')", "open('{sentinel}', 'w')", "exec('x=1')", "eval('1')",
    "globals()", "().__class__.__bases__[0].__subclasses__()", "(1).__class__", "x", "__builtins__",
    "lambda: 1", "(lambda: 1)()", "[c for c in 'ab']", "{1: 2}", "f'{1}'", "(y := 1)", "1 if print(1) else 2",
    "1; import os", "import os", "breakpoint()", "'a' * 10", "b'1'", "...", "1[0]", "1 .real", "*a",
    "__import__", "print", "`id`", "$(id)", "1 && id", "1 | id",
]


# ------------------------------------------------------------------ no code, shell or query syntax
def test_calculator_never_runs_model_text(tmp_path, monkeypatch):
    sentinel = tmp_path / "pwned"
    real_compile = builtins.compile
    compiled: list[int] = []

    def spy_compile(source, filename, mode, flags=0, *args, **kwargs):
        compiled.append(flags)
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("model text reached eval/exec/__import__")

    monkeypatch.setattr(builtins, "compile", spy_compile)  # ast.parse goes through compile(..., ONLY_AST)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    for expr in CODE:
        with pytest.raises(CalculatorError):
            evaluate(expr.replace("{sentinel}", str(sentinel)))
    assert not sentinel.exists()
    assert compiled and all(flags & ast.PyCF_ONLY_AST for flags in compiled)  # parsed to a tree, never compiled


MODEL_FACING = ["tools", "envs", "retrieval", "rollout", "rewards"]
DANGEROUS_CALLS = {"system", "popen", "Popen", "run", "call", "check_output", "check_call", "spawnv", "execv",
                   "execvp", "loads", "load", "unsafe_load", "full_load"}
DANGEROUS_MODULES = {"subprocess", "os", "pickle", "shlex", "marshal", "yaml"}


def test_model_facing_code_has_no_eval_shell_or_query_parser():
    """A static scan of the packages that handle model text: no eval/exec, no shell, no pickle,
    and no search-engine query parser (tantivy's parse_query, Elasticsearch's query_string)."""
    found = []
    for sub in MODEL_FACING:
        for path in sorted((PACKAGE / sub).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    f = node.func
                    if isinstance(f, ast.Name) and f.id in {"eval", "exec", "compile", "__import__"}:
                        found.append(f"{path.name}:{node.lineno} {f.id}()")
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                            and f.value.id in DANGEROUS_MODULES and f.attr in DANGEROUS_CALLS:
                        found.append(f"{path.name}:{node.lineno} {f.value.id}.{f.attr}()")
                    if isinstance(f, ast.Attribute) and f.attr == "parse_query":
                        found.append(f"{path.name}:{node.lineno} .parse_query()")
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                    if any(n and n.split(".")[0] in {"subprocess", "pickle", "marshal", "shlex"} for n in names):
                        found.append(f"{path.name}:{node.lineno} imports {names}")
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        re.search(r"\b(simple_)?query_string\b", node.value) and not _is_docstring(tree, node):
                    found.append(f"{path.name}:{node.lineno} uses query_string")
                if isinstance(node, ast.keyword) and node.arg == "shell":
                    found.append(f"{path.name}:{node.lineno} shell=")
    assert found == [], found


def _is_docstring(tree: ast.AST, const: ast.Constant) -> bool:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and body[0].value is const:
            return True
    return False


def _paths_to(value, needle: str, path=()):
    """Every key path in a JSON-like tree where `needle` appears (in a key or a string value)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if needle in str(k):
                yield (*path, k, "<key>")
            yield from _paths_to(v, needle, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths_to(v, needle, (*path, i))
    elif isinstance(value, str) and needle in value:
        yield path


INJECTION = ['AND OR "( ) title:foo *', "title:(", '" } , "query_string": {"query": "*"} , "x": { "',
             '{"script": {"source": "Runtime.exec(\'id\')"}}', "\\u0022}}", "*:*", "_all:*", "a\x00b", "🙂"]


def test_es_query_body_holds_model_text_only_as_a_match_value():
    from agent_r1.retrieval.es_backend import multi_match

    for text in INJECTION:
        body = multi_match(text, 3)
        assert list(_paths_to(body, text)) == [("query", "multi_match", "query")], (text, body)
        assert set(body["query"]) == {"multi_match"} and body["query"]["multi_match"]["type"] == "most_fields"
        assert "query_string" not in json.dumps(body).replace(json.dumps(text)[1:-1], "")
        assert json.loads(json.dumps(body)) == body  # sent as JSON: the text stays one string value


def test_es_requests_sent_carry_model_text_only_in_match_bodies():
    """What ElasticsearchRetriever actually sends (recorded instead of a server)."""
    from agent_r1.retrieval.base import SearchConfig
    from agent_r1.retrieval.es_backend import ElasticsearchRetriever

    retriever = ElasticsearchRetriever(SearchConfig(backend="elasticsearch", index_dir="", url="http://127.0.0.1:1",
                                                    index_name="idx"))
    sent = []

    def msearch(searches):
        sent.extend(searches)
        return {"responses": [{"hits": {"hits": []}} for _ in searches[::2]]}

    retriever.client = type("Recorder", (), {"msearch": staticmethod(msearch), "close": lambda self: None})()
    assert retriever.search(INJECTION, 3) == [[] for _ in INJECTION]
    headers, bodies = sent[::2], sent[1::2]
    assert all(h == {"index": "idx"} for h in headers)  # the model cannot pick the index
    for text, body in zip(INJECTION, bodies):
        assert list(_paths_to(body, text)) == [("query", "multi_match", "query")]


# ------------------------------------------------------------------ paths
PATHLIKE = re.compile(r"path|file|dir|folder|url|uri", re.I)


def test_no_builtin_tool_takes_a_path():
    from agent_r1.tools.registry import BUILTIN_TOOL_MODULES, TOOL_FACTORIES, load_builtin_tools

    load_builtin_tools()
    builtin = [name for name, f in TOOL_FACTORIES.items() if getattr(f, "__module__", "") in BUILTIN_TOOL_MODULES]
    assert sorted(builtin) == ["calculator", "search"]
    for name in builtin:
        params = TOOL_FACTORIES[name].parameters
        for prop, schema in params.get("properties", {}).items():
            assert not PATHLIKE.search(prop), (name, prop)
            assert schema.get("format") not in ("uri", "uri-reference", "iri"), (name, prop)
        assert params.get("additionalProperties") is False, name  # no smuggled extra arguments


@pytest.mark.parametrize("key, value", [("data.train_file", "../../etc/passwd"), ("data.eval_file", "/etc/passwd"),
                                         ("data.train_file", "sub/../../x.jsonl"), ("data.eval_file", "")])
def test_config_file_names_cannot_leave_their_folder(key, value):
    from agent_r1.config import load_config

    with pytest.raises(ValueError, match=re.escape(key)):
        load_config(None, {key: value})


def test_a_sample_cannot_name_files_or_tools_outside_the_run():
    from agent_r1.envs.tool_env import EnvConfig, sample_env_config
    from agent_r1.rewards.scoring import RewardConfig

    env = EnvConfig(tools=["search"])
    for bad in ({"tool_args": {"search": {"index_dir": "/"}}}, {"format": "hermes"}, {"tools": ["shell"]},
                {"tools": "search; rm -rf /"}):
        with pytest.raises(ValueError, match="sample 's1'"):
            sample_env_config({"id": "s1", "env": bad}, env, RewardConfig())


# ------------------------------------------------------------------ credentials
def _secret_env(monkeypatch, api_key: bool = True) -> None:
    if api_key:
        monkeypatch.setenv("AGENT_R1_ES_API_KEY", API_KEY)
        monkeypatch.delenv("AGENT_R1_ES_USER", raising=False)
        monkeypatch.delenv("AGENT_R1_ES_PASSWORD", raising=False)
    else:
        monkeypatch.delenv("AGENT_R1_ES_API_KEY", raising=False)
        monkeypatch.setenv("AGENT_R1_ES_USER", USER)
        monkeypatch.setenv("AGENT_R1_ES_PASSWORD", PASSWORD)


def _assert_clean(text: str, where: str) -> None:
    for secret in (API_KEY, PASSWORD):
        assert secret not in text, f"a credential leaked into {where}"


def test_credentials_never_reach_mlflow_params_or_tags(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from agent_r1.config import load_config
    from agent_r1.tracking import RunTracker, flatten_params, machine_tags

    _secret_env(monkeypatch, api_key=True)
    monkeypatch.setenv("AGENT_R1_ES_PASSWORD", PASSWORD)
    cfg = load_config(REPO_ROOT / "params.yaml", {"search.backend": "elasticsearch",
                                                  "search.url": "http://127.0.0.1:9200"})
    tree = cfg.to_dict()
    flat = flatten_params(tree)
    _assert_clean(json.dumps(flat), "flattened params")
    uri = fresh_store(tmp_path)
    tracker = RunTracker("security", experiment="security", tracking_uri=uri, buffer_dir=tmp_path / "buffer",
                         tags=machine_tags(tree), verbose=False)
    tracker.log_config(tree)
    report = tracker.close()
    assert report["pending"] == 0 and report["rejected"] == 0
    run = MlflowClient(tracking_uri=uri).get_run(tracker.run_id)
    assert run.data.params["search.url"] == "http://127.0.0.1:9200" and len(run.data.params) == len(flat)
    _assert_clean(json.dumps({**run.data.params, **run.data.tags}), "MLflow params/tags")
    _assert_clean((tmp_path / "mlflow.db").read_bytes().decode("latin-1"), "the MLflow store")
    with pytest.raises(ValueError, match="search.url holds credentials"):
        load_config(None, {"search.url": f"http://elastic:{PASSWORD}@127.0.0.1:9200"})


@pytest.mark.parametrize("api_key", [True, False])
def test_credentials_never_printed_by_index_and_search(es_server, tmp_path, monkeypatch, capsys, caplog,  # noqa: F811
                                                       api_key):
    import logging

    from agent_r1.cli import main as cli_main
    from agent_r1.data.corpus import make_document
    from agent_r1.data.io import write_jsonl

    _secret_env(monkeypatch, api_key)
    caplog.set_level(logging.DEBUG)
    write_jsonl(tmp_path / "corpus.jsonl", [make_document("Karivo", "a river town"),
                                            make_document("Lumeno", "a capital city")])
    out = tmp_path / "idx"
    assert cli_main(["index", "--corpus", str(tmp_path / "corpus.jsonl"), "--backend", "elasticsearch",
                     "--out", str(out), "--url", es_server.url, "--index-name", f"sec-{int(api_key)}"]) == 0
    # credentials go only to the URL the user names
    assert cli_main(["search", "--index", str(out), "--url", es_server.url, "river town", "-k", "1"]) == 0
    assert cli_main(["search", "--index", str(out), "--url", es_server.url, "river", "-k", "1", "--json"]) == 0
    # and the error path: a server that is not there, retried as always, less the 7.5 s its backoff waits
    from agent_r1.retrieval import es_backend

    waits = []
    monkeypatch.setattr(es_backend, "time", SimpleNamespace(sleep=waits.append))
    (tmp_path / "dead").mkdir()
    (tmp_path / "dead" / "retriever.json").write_text(json.dumps(
        {"backend": "elasticsearch", "url": "http://127.0.0.1:1", "index_name": "x"}))
    assert cli_main(["search", "--index", str(tmp_path / "dead"), "--url", "http://127.0.0.1:1", "x"]) == 2
    assert waits  # the retries ran (their warnings are among the logs checked below)
    captured = capsys.readouterr()
    assert "Karivo" in captured.out and "127.0.0.1:1" in captured.err
    for where, text in (("stdout", captured.out), ("stderr", captured.err), ("logs", caplog.text),
                        ("retriever.json", (out / "retriever.json").read_text())):
        _assert_clean(text, where)
        assert USER not in text or where == "logs", where


def test_an_es_url_with_credentials_is_refused():
    from agent_r1.retrieval.base import SearchConfig, open_retriever

    with pytest.raises(ValueError, match="holds credentials") as info:
        open_retriever(SearchConfig(backend="elasticsearch", url=f"http://elastic:{PASSWORD}@127.0.0.1:9200"))
    _assert_clean(str(info.value), "the error")


# ------------------------------------------------------------------ services bind to 127.0.0.1
def test_service_scripts_bind_to_loopback():
    infra = REPO_ROOT / "infra"
    mlflow = (infra / "mlflow" / "server.sh").read_text()
    assert re.search(r"mlflow\" server --host 127\.0\.0\.1 ", mlflow)
    prefect = (infra / "prefect" / "server.sh").read_text()
    assert "prefect server start --host 127.0.0.1" in prefect
    assert "PREFECT_API_URL:-http://127.0.0.1:" in (infra / "prefect" / "env.sh").read_text()
    compose = (infra / "elasticsearch" / "docker-compose.yml").read_text()
    ports = re.findall(r'^\s*-\s*"([^"]+:\d+)"\s*$', compose, re.M)
    assert ports and all(p.startswith("127.0.0.1:") for p in ports), ports
    ray = (infra / "ray" / "start-local.sh").read_text()
    assert "--node-ip-address=127.0.0.1" in ray and "--include-dashboard=false" in ray
    assert "--dashboard-host=127.0.0.1" in (infra / "ray" / "start-cluster.md").read_text()
    # no script or Python file of the project binds every interface
    for path in [*infra.rglob("*"), *PACKAGE.rglob("*.py"), *(REPO_ROOT / "flows").rglob("*.py"),
                 *(REPO_ROOT / "benchmarks").glob("*.py"), REPO_ROOT / "Makefile",
                 *(REPO_ROOT / "tests").rglob("*.py")]:
        if path.is_file() and path.name != "test_security.py":
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not re.search(r"0\.0\.0\.0|--host[= ]+\"?(::|\*)", text), path
    ray_py = (PACKAGE / "training" / "ray_trainer.py").read_text()
    assert "include_dashboard=False" in ray_py
    # the one noida-db launcher (tests/es_fixture.py and the retrieval benchmarks start it through this)
    assert '"--host", "127.0.0.1"' in (REPO_ROOT / "tests" / "support" / "noida.py").read_text()
    for user in ("tests/es_fixture.py", "benchmarks/retrieval.py", "benchmarks/retrieval_scale.py",
                 "benchmarks/retriever_load.py"):
        assert "start_noida" in (REPO_ROOT / user).read_text() and "Popen" not in (REPO_ROOT / user).read_text(), user


def _outside_ip() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent; this picks the outgoing interface
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


def test_es_fixture_server_answers_on_loopback_only(es_server):  # noqa: F811
    port = int(es_server.url.rsplit(":", 1)[1])
    assert es_server.answers()
    ip = _outside_ip()
    if ip is None:
        return  # only loopback exists here: nothing outside to probe
    with socket.socket() as s:
        s.settimeout(1)
        assert s.connect_ex((ip, port)) != 0, f"noida-db answers on {ip}:{port}"
