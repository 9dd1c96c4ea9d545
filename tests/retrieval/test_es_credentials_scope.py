"""Elasticsearch credentials go only to the URL the run's own config (or the command line) names,
never to whatever URL an index folder's retriever.json says. The index folder is a
DVC output: whoever can write the DVC remote could otherwise redirect the password to their host."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PASSWORD = "es-Pa55-w0rd"


class _Recorder:
    """An HTTP server on 127.0.0.1 that answers like Elasticsearch's _count, _mapping and _msearch and records every
    request's Authorization header."""

    def __init__(self) -> None:
        self.auth: list[str | None] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder.auth.append(self.headers.get("Authorization"))
                answer = ({"responses": [{"status": 200, "hits": {"hits": []}}]} if "_msearch" in self.path
                          else {"corpus": {"mappings": {}}} if "_mapping" in self.path
                          else {"count": 3, "_shards": {"total": 1}})
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_HEAD = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def servers(monkeypatch):
    monkeypatch.delenv("AGENT_R1_ES_API_KEY", raising=False)
    monkeypatch.setenv("AGENT_R1_ES_USER", "elastic")
    monkeypatch.setenv("AGENT_R1_ES_PASSWORD", PASSWORD)
    own, other = _Recorder(), _Recorder()
    yield own, other
    own.stop()
    other.stop()


def _index_dir(tmp_path: Path, url: str, corpus_sha1: str = "x") -> Path:
    d = tmp_path / "es-index"
    d.mkdir()
    (d / "retriever.json").write_text(json.dumps({"backend": "elasticsearch", "url": url, "index_name": "corpus",
                                                  "corpus_sha1": corpus_sha1}))
    return d


def _cfg(url: str):
    from agent_r1.config import load_config

    return load_config(None, {"search.backend": "elasticsearch", "search.url": url, "search.index_name": "corpus"})


def test_a_manifest_naming_another_host_gets_no_credentials(servers, tmp_path):
    from agent_r1.runs.assembly import open_run_index

    own, other = servers
    index_dir = _index_dir(tmp_path, other.url)
    with pytest.raises(ValueError) as info:
        open_run_index(_cfg(own.url), index_dir)
    message = str(info.value)
    assert other.url in message and own.url in message and "search.url" in message
    assert PASSWORD not in message
    assert other.auth == [], "a request went to the host retriever.json named"
    assert own.auth == []


def test_the_runs_own_url_gets_the_credentials(servers, tmp_path):
    from agent_r1.runs.assembly import open_run_index

    own, _ = servers
    retriever = open_run_index(_cfg(own.url), _index_dir(tmp_path, own.url))
    try:
        assert retriever.count() == 3
    finally:
        retriever.close()
    assert own.auth and all(a and a.startswith("Basic ") for a in own.auth)


def test_the_search_command_sends_credentials_only_to_the_url_it_is_given(servers, tmp_path, capsys):
    from agent_r1.cli import main as cli_main

    own, other = servers
    index_dir = _index_dir(tmp_path, other.url)
    for extra in ([], ["--url", own.url]):  # the default URL, then another the user trusts
        capsys.readouterr()
        assert cli_main(["search", "--index", str(index_dir), *extra, "q", "--json"]) != 0
        err = capsys.readouterr().err
        assert "--url" in err and other.url in err and PASSWORD not in err
    assert cli_main(["search", "--index", str(index_dir), "--url", other.url, "q", "--json"]) == 0
    assert other.auth and other.auth[0].startswith("Basic "), "the URL the user named gets the credentials"
    other.auth.clear()
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "q?", "answers": ["a"], "supporting_titles": ["T"]}) + "\n")
    for extra in ([], ["--url", own.url]):
        capsys.readouterr()
        assert cli_main(["retrieval-eval", "--index", str(index_dir), *extra, "--questions", str(questions)]) != 0
        assert "--url" in capsys.readouterr().err
    assert other.auth == []


def test_ensure_index_rebuilds_an_index_that_names_another_server(servers, tmp_path, monkeypatch):
    """The same corpus and backend, but another server: that index is not this run's, so it is built
    where the run's config says (never reused, which would send the run's searches there)."""
    from agent_r1.retrieval.base import corpus_sha1
    from agent_r1.runs import assembly

    own, other = servers
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text('{"id": "1", "title": "T", "text": "x"}\n')
    index_dir = _index_dir(tmp_path, other.url, corpus_sha1(data / "corpus.jsonl"))
    cfg = _cfg(own.url)
    cfg.search.index_dir = str(index_dir)
    cfg.train.runs_dir = str(tmp_path / "runs")  # its corpus digest is cached there: never the repository's runs/
    built = []
    monkeypatch.setattr(assembly, "build_index", lambda corpus, d, config: built.append(config))
    assembly.ensure_index(cfg, data)
    assert built and built[0].server_url() == own.url
    assert other.auth == []
