"""The trainer's own local Ray (`ray.enabled`, no `ray.address`): Ray's gRPC servers listen on every
interface whatever the node address, so token auth is what keeps another machine (or another
user's process) from running tasks in it. On by default, the token in a private file inside Ray's
temp folder (never ~/.ray); off only by `ray.insecure: true`."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agent_r1.config import RayConfig, load_config


@pytest.fixture
def short_temp():
    """Ray's socket paths must fit in 107 bytes: a short folder of this test's own."""
    path = tempfile.mkdtemp(prefix="ar1-auth-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_ray_init(monkeypatch, tmp_path):
    """ray.init recorded, not run: which auth mode and token a local start would get."""
    import ray

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append({**kw, "env": dict(os.environ)}))
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return calls


def test_local_ray_starts_with_token_auth_and_a_private_token(fake_ray_init, short_temp, tmp_path):
    from agent_r1.training.ray_trainer import init_ray

    assert init_ray(RayConfig(temp_dir=short_temp)) is True
    env = fake_ray_init[0]["env"]
    assert env["RAY_AUTH_MODE"] == "token"
    token = Path(env["RAY_AUTH_TOKEN_PATH"])
    assert token.parent == Path(short_temp) and stat.S_IMODE(token.stat().st_mode) == 0o600
    assert len(token.read_text().strip()) >= 32
    assert fake_ray_init[0]["include_dashboard"] is False
    assert not (tmp_path / "home" / ".ray").exists()


def test_an_insecure_local_ray_is_an_explicit_choice(fake_ray_init, short_temp):
    from agent_r1.training.ray_trainer import init_ray

    cfg = load_config(None, {"ray.enabled": True, "ray.insecure": True, "ray.temp_dir": short_temp})
    init_ray(cfg.ray)
    assert fake_ray_init[0]["env"]["RAY_AUTH_MODE"] == "disabled"
    assert not list(Path(short_temp).glob("*token*"))


def test_a_shared_token_file_others_can_read_is_refused(fake_ray_init, short_temp):
    from agent_r1.training.ray_trainer import init_ray

    leaked = Path(short_temp) / "auth_token"
    leaked.write_text("x" * 64)
    leaked.chmod(0o644)
    with pytest.raises(PermissionError, match="auth_token"):
        init_ray(RayConfig(temp_dir=short_temp))
    assert fake_ray_init == []


def test_a_process_without_the_token_cannot_join_the_local_ray(short_temp, monkeypatch):
    import ray

    from agent_r1.training.ray_trainer import init_ray

    if ray.is_initialized():  # a Ray another module of this process left up: this test needs its own
        ray.shutdown()
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    assert init_ray(RayConfig(temp_dir=short_temp, num_cpus=1)) is True
    try:
        assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42
        gcs = ray._private.worker._global_node.gcs_address
        outsider = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        code = (f"import ray; ray.init(address={gcs!r}, configure_logging=False); "
                "print('JOINED', ray.get(ray.remote(lambda: 1).remote()))")
        # a refused join is retried once a second for 20 s by default; 3 tries say the same, and the
        # holder of the token, given the same 3, joins (so the refusals are the token's doing)
        quick = {"RAY_NUM_REDIS_GET_RETRIES": "3", "RAY_USAGE_STATS_ENABLED": "0"}
        token = os.environ["RAY_AUTH_TOKEN_PATH"]
        for mode, extra, joins in (("disabled", {}, False), ("token", {}, False),
                                   ("token", {"RAY_AUTH_TOKEN_PATH": token}, True)):
            home = Path(short_temp) / f"home-{mode}-{joins}"  # a fresh HOME: no ~/.ray/auth_token
            home.mkdir()
            proc = subprocess.run([sys.executable, "-c", code], env={**outsider, **quick, **extra, "RAY_AUTH_MODE": mode,
                                  "HOME": str(home)}, capture_output=True, text=True, timeout=180)
            assert (proc.returncode == 0 and "JOINED 1" in proc.stdout) == joins, (mode, joins, proc.stderr[-800:])
    finally:
        ray.shutdown()


def test_joining_a_cluster_follows_the_environment_after_a_local_token_ray(monkeypatch, short_temp):
    """A local Ray switched this process to token mode; a later join of a cluster without auth (as
    RAY_AUTH_MODE=disabled says) must not keep demanding the token of that cluster's workers."""
    import ray
    from ray._raylet import AuthenticationMode, get_authentication_mode

    from agent_r1.training.ray_trainer import init_ray

    modes = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: modes.append(get_authentication_mode()))
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    init_ray(RayConfig(temp_dir=short_temp))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    init_ray(RayConfig(address="127.0.0.1:1"))
    assert modes == [AuthenticationMode.TOKEN, AuthenticationMode.DISABLED]
