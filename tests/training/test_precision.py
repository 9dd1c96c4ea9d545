"""`train.precision: auto` follows what the device computes natively, and bf16 forced where it is
emulated warns naming the key: on AVX2-only cores bf16 is a trap (an iteration
that took 328 s in fp32 did not finish in 900 s in bf16)."""

from __future__ import annotations

import logging

import pytest
import torch

from agent_r1.config import load_config
from agent_r1 import precision
from agent_r1.training.compute import Compute

AVX2_EPYC = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma bmi2\n"  # AVX2-only cores, where bf16 is emulated
ZEN4 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
SAPPHIRE_RAPIDS = "flags\t\t: avx2 avx512f amx_tile amx_bf16 amx_int8\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"
GRAVITON2 = "processor\t: 0\nFeatures\t: fp asimd atomics\n"


@pytest.mark.parametrize("text,machine,native", [(AVX2_EPYC, "x86_64", False), (ZEN4, "x86_64", True),
                                                 (SAPPHIRE_RAPIDS, "x86_64", True), (GRAVITON3, "aarch64", True),
                                                 (GRAVITON2, "aarch64", False), ("", "x86_64", False)])
def test_cpu_bf16_is_read_from_the_instruction_flags(text, machine, native):
    assert precision.cpuinfo_has_bf16(text, machine) is native


def _compute(monkeypatch, value, native):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    return Compute.from_config(load_config(None, {"train.precision": value, "train.device": "cpu"}))


@pytest.mark.parametrize("native", [False, True])
def test_auto_is_bf16_only_where_the_cpu_computes_it(monkeypatch, native):
    assert _compute(monkeypatch, "auto", native).precision == ("bf16" if native else "fp32")


def test_bf16_forced_where_emulated_warns_naming_the_key(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="agent_r1.precision"):
        assert _compute(monkeypatch, "bf16", False).precision == "bf16"  # honoured, but said
    assert "train.precision=bf16" in caplog.text and "emulated" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent_r1.precision"):
        assert _compute(monkeypatch, "bf16", True).precision == "bf16"
        assert _compute(monkeypatch, "fp32", False).precision == "fp32"
    assert caplog.text == ""


def test_autocast_follows_the_resolved_precision(monkeypatch):
    x = torch.randn(4, 4)
    for native, dtype in ((False, torch.float32), (True, torch.bfloat16)):
        with _compute(monkeypatch, "auto", native).autocast():
            assert (x @ x).dtype == dtype


@pytest.mark.parametrize("native", [False, True])
def test_a_config_that_names_no_precision_follows_the_device(monkeypatch, native):
    """The default is `auto`: bf16 only where the device computes it natively."""
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    cfg = load_config(None, {"train.device": "cpu"})
    assert cfg.train.precision == "auto"
    assert Compute.from_config(cfg).precision == ("bf16" if native else "fp32")



@pytest.mark.parametrize("value,cpu,native", [("native", False, True), ("emulated", True, False),
                                              ("detect", True, True), ("detect", False, False),
                                              ("", True, True), (" Native ", False, True)])
def test_the_environment_switch_overrides_what_the_cpu_reports(monkeypatch, value, cpu, native):
    """AGENT_R1_CPU_BF16 makes `auto` resolve as on a bf16-native CPU (or one without) whatever this one is:
    the test session pins it (tests/precision_modes.py), so no test's outcome depends on the CPU."""
    monkeypatch.setattr(precision, "_cpuinfo_native_bf16", lambda: cpu)
    monkeypatch.setenv(precision.CPU_BF16_ENV, value)
    assert precision.cpu_has_native_bf16() is native
    cfg = load_config(None, {"train.device": "cpu"})
    assert Compute.from_config(cfg).precision == ("bf16" if native else "fp32")


def test_a_bad_switch_value_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv(precision.CPU_BF16_ENV, "yes")
    with pytest.raises(ValueError, match=r"AGENT_R1_CPU_BF16='yes'; choose one of \['detect', 'emulated', 'native'\]"):
        Compute.from_config(load_config(None, {"train.device": "cpu"}))


def test_the_session_pins_the_switch_and_the_mode_fixture_flips_it(cpu_bf16):
    """The suite runs with `auto` resolved alike on every CPU; a `both_cpu_modes` test sees each mode."""
    import os

    assert os.environ[precision.CPU_BF16_ENV] == cpu_bf16
    assert precision.cpu_has_native_bf16() is (cpu_bf16 == "native")
