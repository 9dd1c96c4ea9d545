"""Shared test fixtures for the retrieval tests: real data paths and a real noida-db server.

Not a conftest.py (the lead owns that): test modules import what they use, e.g.
`from tests.es_fixture import es_server, HOTPOTQA_400` (pytest then registers the fixture).
Each server is started on 127.0.0.1 on a free port in a temp data dir and stopped at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import noida
from tests.support.noida import NoidaServer
from tests.conftest import SAMPLES

REPO_ROOT = Path(__file__).resolve().parents[1]
HOTPOTQA_400 = SAMPLES / "hotpotqa" / "hotpotqa_dev_distractor_400.jsonl"


def require_sample(path: Path) -> Path:
    # A missing sample is a broken checkout, never a reason to skip: fail and say where it belongs.
    if not path.exists():
        pytest.fail(f"sample data file {path} not found: it is tracked in the repository under samples/ "
                    f"(see samples/README.md); restore it with `git checkout -- {path.relative_to(REPO_ROOT)}`")
    return path


def free_port() -> int:
    return noida.free_port()


def start_noida(data_dir: Path, timeout_s: float = 30.0) -> NoidaServer:
    """tests/support/noida.py's server, on this module's `free_port()` (a test that restarts a server on
    the same port patches it); a missing noida-db fails the test, never skips it."""
    if noida.noida_binary() is None:
        pytest.fail("noida-db is not installed: run `make install` (it is in the dev extra)")
    return noida.start_noida(data_dir, timeout_s, port=free_port())


@pytest.fixture(scope="module")
def es_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NoidaServer]:
    """One noida-db Elasticsearch server per test module."""
    server = start_noida(tmp_path_factory.mktemp("noida"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fresh_es_server(tmp_path: Path) -> Iterator[NoidaServer]:
    """A server of the test's own, for tests that stop it."""
    server = start_noida(tmp_path / "noida")
    try:
        yield server
    finally:
        server.stop()
