"""infra/ray's scripts start Ray with token auth unless the caller turns it off: Ray's gRPC servers
listen on every interface whatever the node address, so a cluster without a token takes tasks from
any process that reaches the machine. The token is made private (0600) in the cluster's temp folder,
and a token file others can read is refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = ("start-local.sh", "start-two-nodes.sh")


def _ray_auth(folder: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return subprocess.run(["bash", "-c", '. infra/ray/auth.sh && ray_auth "$1" && echo "$RAY_AUTH_MODE $RAY_AUTH_TOKEN_PATH"',
                           "-", str(folder)], cwd=REPO, env={**clean, **env}, capture_output=True, text=True, timeout=30)


def test_token_auth_is_the_default_with_a_private_token(tmp_path):
    done = _ray_auth(tmp_path / "ray")
    assert done.returncode == 0, done.stderr
    token = tmp_path / "ray" / "auth_token"
    assert done.stdout.split() == ["token", str(token)]
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text()) == 64
    again = _ray_auth(tmp_path / "ray")  # a second start keeps the token the clients already hold
    assert again.returncode == 0 and token.read_text() == token.read_text()


def test_no_auth_only_when_asked_and_said_aloud(tmp_path):
    done = _ray_auth(tmp_path / "ray", RAY_AUTH_MODE="disabled")
    assert done.returncode == 0 and done.stdout.split() == ["disabled"]
    assert "token auth is off" in done.stderr and not (tmp_path / "ray").exists()


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_token_file_others_can_read_is_refused(tmp_path, mode):
    folder = tmp_path / "ray"
    folder.mkdir()
    (folder / "auth_token").write_text("0" * 64)
    (folder / "auth_token").chmod(mode)
    done = _ray_auth(folder)
    assert done.returncode != 0 and str(folder / "auth_token") in done.stderr and "chmod 600" in done.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_sets_auth_before_it_starts_ray(script):
    text = (REPO / "infra" / "ray" / script).read_text()
    assert "RAY_AUTH_MODE=\"${RAY_AUTH_MODE:-disabled}\"" not in text
    assert text.index('ray_auth "$TEMP_DIR"') < text.index('"$RAY" start')
