"""The vLLM tests' session pins the CPU precision mode as the main suite's does (tests/precision_modes.py):
`train.precision: auto` resolves alike on every CPU, and `both_cpu_modes` tests run under each."""

from __future__ import annotations

from tests import precision_modes
from tests.precision_modes import cpu_bf16  # noqa: F401  (the per-mode fixture)


def pytest_configure(config) -> None:
    precision_modes.configure(config)


def pytest_collection_modifyitems(items) -> None:
    precision_modes.mark_mode_tests(items)
