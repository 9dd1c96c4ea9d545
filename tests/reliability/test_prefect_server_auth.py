"""The Prefect server infra/prefect/server.sh starts: loopback only, a credential on every API call
(generated into a private file when none is given, never printed), and no cross-origin caller but
its own page. A real server on a free port, with its state in tmp_path."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.servers import free_port, stop, wait_http

ROOT = Path(__file__).resolve().parents[2]


def _call(url: str, method: str = "POST", headers: dict[str, str] | None = None,
          body: bytes | None = b"{}") -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(url, data=body if method != "OPTIONS" else None, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}


def _server_env(tmp_path: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_PORT=str(port),
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    return env


def test_server_sh_needs_a_credential_and_refuses_foreign_origins(tmp_path):
    port = free_port()
    env = _server_env(tmp_path, port)
    log = tmp_path / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", str(ROOT / "infra" / "prefect" / "server.sh")], env=env, cwd=tmp_path,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    try:
        wait_http(f"{api}/health", proc, timeout=300)  # the health probe needs no credential
        auth_file = tmp_path / "prefect-home" / "api_auth"
        assert auth_file.exists(), sorted(p.name for p in (tmp_path / "prefect-home").iterdir())
        assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
        credential = auth_file.read_text().strip()
        user, _, password = credential.partition(":")
        assert user and len(password) >= 32
        assert password not in log.read_text(), "the credential was printed"

        # no credential, a wrong one: refused; the file's: served
        assert _call(f"{api}/flow_runs/filter")[0] == 401
        wrong = base64.b64encode(f"{user}:not-it".encode()).decode()
        assert _call(f"{api}/flow_runs/filter", headers={"Authorization": f"Basic {wrong}"})[0] == 401
        token = base64.b64encode(credential.encode()).decode()
        code, _ = _call(f"{api}/flow_runs/filter", headers={"Authorization": f"Basic {token}"})
        assert code == 200

        # a page of another origin is not let in by CORS; the server's own page is
        own, foreign = f"http://127.0.0.1:{port}", "http://evil.example"
        for origin, allowed in ((foreign, False), (own, True)):
            code, headers = _call(f"{api}/flow_runs/", method="OPTIONS", headers={
                "Origin": origin, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type"})
            got = headers.get("access-control-allow-origin")
            assert (got == origin) is allowed, (origin, code, got)
            assert got != "*"
        code, headers = _call(f"{api}/flow_runs/filter", headers={"Origin": foreign})
        assert code == 401 and headers.get("access-control-allow-origin") in (None, own)

        # a client given the same file's credential (env.sh does it for serve.sh and worker.sh) gets in
        probe = subprocess.run(
            ["bash", "-c", f'source "{ROOT}/infra/prefect/env.sh" >/dev/null && '
             'python -c "import os, json; print(json.dumps({k: bool(os.environ.get(k)) for k in '
             "('PREFECT_API_AUTH_STRING', 'PREFECT_SERVER_API_AUTH_STRING')}))\""],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr
        assert json.loads(probe.stdout.strip().splitlines()[-1]) == {"PREFECT_API_AUTH_STRING": True,
                                                                    "PREFECT_SERVER_API_AUTH_STRING": True}
        assert password not in probe.stdout + probe.stderr
    finally:
        stop(proc)


def test_env_sh_refuses_a_credential_file_others_can_read(tmp_path):
    home = tmp_path / "prefect-home"
    home.mkdir()
    (home / "api_auth").write_text("agent-r1:" + "x" * 40 + "\n")
    (home / "api_auth").chmod(0o644)
    env = _server_env(tmp_path, free_port())
    proc = subprocess.run(["bash", "-c", f'source "{ROOT}/infra/prefect/env.sh"'], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "api_auth" in proc.stderr and "chmod 600" in proc.stderr
    assert "x" * 40 not in proc.stdout + proc.stderr
