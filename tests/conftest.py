"""Shared fixtures: a tiny real transformers model with a locally trained tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# per-process PREFECT_HOME and torch threads, xdist's units (a module, the Ray modules), and a check
# for runs/, data/ or mlruns/ the session creates in the repository (see tests/isolation.py); the
# session's CPU precision mode and the per-mode fixture (see tests/precision_modes.py)
from tests import isolation, precision_modes
from tests.isolation import (  # noqa: F401
    pytest_runtest_teardown,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_unconfigure,
    pytest_xdist_make_scheduler,
)
from tests.precision_modes import cpu_bf16  # noqa: F401


def pytest_configure(config) -> None:
    precision_modes.configure(config)
    isolation.pytest_configure(config)


def pytest_collection_modifyitems(items) -> None:
    precision_modes.mark_mode_tests(items)
    isolation.order_items(items)


REPO = Path(__file__).resolve().parents[1]
# Public dataset samples the tests read, kept in the repository (see samples/README.md): a clone
# with nothing beside it must pass, so no test reads a path outside REPO.
SAMPLES = REPO / "samples"


@pytest.fixture(autouse=True, scope="session")
def _session_mlflow_store(tmp_path_factory):
    """Runs the tests start (`agent-r1 train` logs to MLflow by default; subprocesses inherit this)
    go to a store of the session's own, never the project's mlruns/. A test that sets its own wins.
    The store is a copy of a migrated one (tests/mlflow_store.py): creating it costs 5-10 s of CPU."""
    from tests.mlflow_store import fresh_store

    root = tmp_path_factory.mktemp("mlflow")
    keys = ("MLFLOW_TRACKING_URI", "AGENT_R1_MLFLOW_BUFFER")
    before = {k: os.environ.get(k) for k in keys}
    if before["MLFLOW_TRACKING_URI"] is None:
        os.environ["MLFLOW_TRACKING_URI"] = fresh_store(root)
    os.environ.setdefault("AGENT_R1_MLFLOW_BUFFER", str(root / "buffer"))
    yield root
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def synthetic_world():
    from agent_r1.data.synthetic import SyntheticConfig, generate_world

    return generate_world(SyntheticConfig(seed=0, n_people=90, n_cities=12, n_countries=4, n_landmarks=6))


@pytest.fixture(scope="session")
def tiny_model(synthetic_world):
    """(model, tokenizer): a 2-layer Llama, randomly initialised, tokenizer trained here."""
    import torch

    from agent_r1.models.build import ModelConfig, build_local_model

    torch.manual_seed(0)
    texts = [d.text for d in synthetic_world.documents] + [q.question for q in synthetic_world.questions()]
    cfg = ModelConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128, vocab_size=400)
    return build_local_model(texts, cfg, seed=0)


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored after: small-tensor tests run far slower with two
    threads on a loaded 2-core machine (modules opt in with `pytestmark`)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
