"""The test session's CPU precision mode: the suite's outcome must not depend on the CPU it runs on.

`train.precision: auto` resolves to bf16 on a CPU with bf16 instructions (avx512_bf16, amx_bf16, Arm
bf16) and to fp32 elsewhere (agent_r1/precision.py). A test that leaves `auto` in its config would
otherwise compute in another precision on another machine: on an AMD EPYC with avx512_bf16, 28
exactness checks of the main suite and 3 vLLM tests failed that passed on AVX2-only cores.

- The session pins `AGENT_R1_CPU_BF16` to `emulated` (auto -> fp32 on every CPU) unless the caller
  set it: `AGENT_R1_CPU_BF16=native pytest ...` runs the suite as on a bf16-native CPU, `detect` as
  this CPU is.
- Tests whose numbers depend on precision pin the one they mean in their config (`FP32`, or bf16
  with tolerances derived for bf16), and carry `both_cpu_modes`: they run once per mode, in every
  session, so a pin that goes missing fails on any machine (`pytest -m precision` runs just them).
"""

from __future__ import annotations

import os

import pytest

from agent_r1.precision import CPU_BF16_ENV

MODES = ("emulated", "native")  # what AGENT_R1_CPU_BF16 says the CPU has: auto -> fp32, auto -> bf16
FP32 = {"train.precision": "fp32"}  # the config override of an exactness check
MARK = "precision"

# a test (or a module's pytestmark) runs once per CPU mode
both_cpu_modes = pytest.mark.usefixtures("cpu_bf16")


def configure(config) -> None:
    """pytest_configure's part: the session's default mode (subprocesses and a local Ray inherit it;
    xdist workers inherit the controller's) and the marker."""
    os.environ.setdefault(CPU_BF16_ENV, "emulated")
    config.addinivalue_line("markers", f"{MARK}: runs once per {CPU_BF16_ENV} mode ({', '.join(MODES)}); "
                                       "its config pins the precision its numbers assume")


def mark_mode_tests(items) -> None:
    """Gives the `precision` marker to every test that runs per mode, so `-m precision` selects them."""
    for item in items:
        if "cpu_bf16" in getattr(item, "fixturenames", ()):
            item.add_marker(MARK)


@pytest.fixture(params=MODES)
def cpu_bf16(request, monkeypatch):
    """The test runs with `auto` resolving as on a CPU without (emulated) and with (native) bf16."""
    monkeypatch.setenv(CPU_BF16_ENV, request.param)
    return request.param
