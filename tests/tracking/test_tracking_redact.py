"""Credentials in MLFLOW_TRACKING_URI are never printed or logged."""

from __future__ import annotations

import json
import logging
import socket

import pytest

PASSWORD = "s3cr3t-Pa55word"


def test_redact_uri():
    from agent_r1.redaction import redact_uri

    assert redact_uri(f"http://alice:{PASSWORD}@mlflow.example:5000/x?y=1") == "http://***@mlflow.example:5000/x?y=1"
    assert redact_uri("https://token@host") == "https://***@host"
    assert redact_uri(f"postgresql://u:{PASSWORD}@db/mlflow") == "postgresql://***@db/mlflow"
    assert redact_uri("http://u:p@ss@host:1/a@b") == "http://***@host:1/a@b"  # a raw `@` in the password
    for plain in ("sqlite:////tmp/mlruns/mlflow.db", "http://127.0.0.1:5000", "file:///a@b/c", "http://host/a@b",
                  "http://host?to=a@b"):
        assert redact_uri(plain) == plain
    message = f"API request to http://alice:{PASSWORD}@h:1/api failed; retry http://bob:x@h2"
    assert redact_uri(message) == "API request to http://***@h:1/api failed; retry http://***@h2"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_password_never_printed_or_logged(tmp_path, monkeypatch, capsys, caplog):
    from agent_r1.tracking import RunTracker, main

    caplog.set_level(logging.DEBUG)
    uri = f"http://alice:{PASSWORD}@127.0.0.1:{_closed_port()}"  # nothing listens: every path warns
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    buffer = tmp_path / "buffer"
    tracker = RunTracker("secret", experiment="unit", buffer_dir=buffer)  # the URI from the environment
    tracker.log_metrics({"loss": 1.0}, 1)
    report = tracker.close()
    hint = tracker.ui_hint()
    shown_uri = tracker.display_uri
    assert main(["status", "--buffer", str(buffer)]) == 0
    assert main(["flush", "--buffer", str(buffer), "--tracking-uri", uri]) == 1

    captured = capsys.readouterr()
    shown = {"stdout": captured.out, "stderr": captured.err, "logging": caplog.text, "ui hint": hint,
             "report": json.dumps(report), "display_uri": shown_uri}
    for where, text in shown.items():
        assert PASSWORD not in text and "alice" not in text, f"the password leaked into {where}"
    # the paths did speak (the test would pass vacuously otherwise), naming the server without its secret
    assert "unreachable" in captured.out and "***@127.0.0.1" in captured.out
    assert hint.startswith("open http://***@127.0.0.1")
    assert report["pending"] >= 3 and report["last_error"]


@pytest.mark.parametrize("uri", ["sqlite:////tmp/x/mlflow.db", "http://127.0.0.1:5000"])
def test_plain_uris_are_shown_as_they_are(uri):
    from agent_r1.tracking import RunTracker

    hint = RunTracker.ui_hint(type("T", (), {"tracking_uri": uri})())
    assert (uri in hint) == uri.startswith("http")


@pytest.mark.parametrize("password", ["pa/ss", "pa#ss", "pa?ss", "pa ss", "p/a#s?s w@rd"])
def test_passwords_sqlalchemy_accepts_are_hidden_whole(password):
    """SQLAlchemy reads a password up to the first `@` (`/ # ?` and spaces included); urllib reads the
    user info up to the last `@` before the first `/ ? #`. Whichever reader a library uses, the text
    shown hides every character either of them could take for the password."""
    from sqlalchemy.engine import make_url

    from agent_r1.redaction import redact_uri

    uri = f"postgresql://alice:{password}@db.example:5432/mlflow"
    if "@" not in password:
        assert make_url(uri).password == password  # the store really takes it, so it must be hidden
    shown = redact_uri(uri)
    assert shown == "postgresql://***@db.example:5432/mlflow", shown
    message = redact_uri(f"could not connect to {uri}: timeout")
    assert password not in message and "alice" not in message and "db.example:5432/mlflow" in message
    for part in password.split():  # no fragment of a spaced password survives either
        assert part not in message


@pytest.mark.parametrize("uri, shown", [
    ("postgresql://db/mlflow?user=u&password=hunter2", "postgresql://db/mlflow?user=u&password=***"),
    ("mysql://db/m?sslmode=require&passwd=hunter2&x=1", "mysql://db/m?sslmode=require&passwd=***&x=1"),
    ("https://mlflow.example/api?token=hunter2", "https://mlflow.example/api?token=***"),
    ("https://mlflow.example/api?api_key=hunter2#frag", "https://mlflow.example/api?api_key=***#frag"),
    ("https://mlflow.example/api?q=1", "https://mlflow.example/api?q=1"),
])
def test_credentials_in_the_query_string_are_hidden(uri, shown):
    from agent_r1.redaction import redact_uri

    assert redact_uri(uri) == shown
    assert "hunter2" not in redact_uri(f"API request to {uri} failed")
