"""`train.precision`: which arithmetic the learner (and the rollout workers, in the learner's
precision) computes in, resolved once per run on the learner's device (training/compute.py), and
by an engine built outside training (evaluation) on its own device (rollout/engines.py).

- `auto` (the value to prefer): bf16 where the device computes it natively, fp32 elsewhere. CUDA:
  `torch.cuda.is_bf16_supported(including_emulation=False)` (Ampere and later). CPU: the x86
  `avx512_bf16` or `amx_bf16` instructions, or the Arm `bf16` extension. Without them bf16 is
  emulated: on 2 AVX2 cores one LoRA iteration of a Qwen2.5-sized vocabulary took 328 s in fp32
  and did not finish in 900 s in bf16.
- `bf16` on a device that only emulates it is honoured, with a warning naming the key.
- `fp32`: float32 throughout.

`AGENT_R1_CPU_BF16` overrides what the CPU is taken to have: `native` resolves `auto` as on a CPU
with bf16 instructions, `emulated` as on one without, unset (or `detect`) reads /proc/cpuinfo. The
test suite pins it, so that its outcome does not depend on the CPU it runs on; a user can name the
answer where /proc/cpuinfo hides the flags (some containers and VMs).
"""

from __future__ import annotations

import functools
import logging
import os
import platform
from pathlib import Path

import torch

log = logging.getLogger(__name__)

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 /proc/cpuinfo flags; Arm reports "bf16" in Features
CPU_BF16_ENV = "AGENT_R1_CPU_BF16"
CPU_BF16_MODES = {"native": True, "emulated": False, "detect": None}


def cpuinfo_has_bf16(cpuinfo: str, machine: str) -> bool:
    """Whether a /proc/cpuinfo text lists bf16 arithmetic instructions for a `machine` (uname -m)."""
    words: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            words.update(value.split())
    if machine.lower() in ("aarch64", "arm64"):
        return "bf16" in words
    return any(flag in words for flag in CPU_BF16_FLAGS)


def cpu_bf16_override() -> bool | None:
    """What `AGENT_R1_CPU_BF16` says the CPU has (None: unset or `detect`, so read the CPU)."""
    value = os.environ.get(CPU_BF16_ENV, "").strip().lower()
    if value not in CPU_BF16_MODES and value != "":
        raise ValueError(f"{CPU_BF16_ENV}={os.environ[CPU_BF16_ENV]!r}; choose one of {sorted(CPU_BF16_MODES)} "
                         "(or leave it unset to read the CPU's flags)")
    return CPU_BF16_MODES.get(value)


@functools.cache
def _cpuinfo_native_bf16() -> bool:
    info = Path("/proc/cpuinfo")
    return info.is_file() and cpuinfo_has_bf16(info.read_text(errors="replace"), platform.machine())


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively: `AGENT_R1_CPU_BF16` where set, else its instruction
    flags (Linux: /proc/cpuinfo; elsewhere: unknown, so no). Read on every call, not cached: a
    process's environment can change between runs (a test session flips it)."""
    override = cpu_bf16_override()
    return _cpuinfo_native_bf16() if override is None else override


def native_bf16(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return cpu_has_native_bf16()
    return False


def resolve_precision(name: str, device: torch.device, warn: bool = True) -> str:
    """`train.precision` (auto | fp32 | bf16) -> fp32 | bf16 on `device`. `warn`: the learner's own
    resolution says when bf16 is emulated (once per run, not again for each engine built)."""
    if name == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    if name == "bf16" and warn and not native_bf16(device):
        if device.type == "cuda":
            raise ValueError(f"train.precision=bf16 but {torch.cuda.get_device_name(device)} cannot compute in "
                             "bf16; set train.precision: fp32 or auto")
        log.warning("train.precision=bf16 on a %s without native bf16 arithmetic: every matmul is emulated and "
                    "runs several times slower than fp32; set train.precision: auto (fp32 here) or fp32",
                    device.type.upper())
    return name
