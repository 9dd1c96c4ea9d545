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
"""

from __future__ import annotations

import functools
import logging
import platform
from pathlib import Path

import torch

log = logging.getLogger(__name__)

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 /proc/cpuinfo flags; Arm reports "bf16" in Features


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


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bf16 arithmetic instructions (Linux: /proc/cpuinfo; elsewhere: unknown, so no)."""
    info = Path("/proc/cpuinfo")
    return info.is_file() and cpuinfo_has_bf16(info.read_text(errors="replace"), platform.machine())


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
