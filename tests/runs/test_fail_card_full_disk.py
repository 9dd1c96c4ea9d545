"""A run that fails on a full disk keeps the error that stopped it: marking its card failed (run.json)
can fail on the same disk, and that second error must not replace the first (the one-line message
and exit code `agent-r1 train` gives a full disk, with the resume hint)."""

from __future__ import annotations

import errno
import json

import pytest


def test_a_card_that_cannot_be_written_keeps_the_runs_own_error(tmp_path, monkeypatch, caplog):
    from agent_r1.runs import folders

    (tmp_path / folders.RUN_FILE).write_text(json.dumps({"status": "running"}))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / folders.RUN_FILE))

    monkeypatch.setattr(folders, "update_record", full)
    stopped = RuntimeError("no space left on the disk holding the run; free space, then resume")
    folders.fail_card(tmp_path, stopped)  # says so in the log instead of raising
    assert "run.json" in caplog.text and "No space left" in caplog.text


def test_other_card_errors_still_raise(tmp_path, monkeypatch):
    from agent_r1.runs import folders

    (tmp_path / folders.RUN_FILE).write_text(json.dumps({"status": "running"}))

    def broken(*args, **kwargs):
        raise ValueError("a bug in the card code")

    monkeypatch.setattr(folders, "update_record", broken)
    with pytest.raises(ValueError, match="a bug"):
        folders.fail_card(tmp_path, RuntimeError("x"))
