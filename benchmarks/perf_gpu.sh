#!/usr/bin/env bash
# The performance benchmarks on a GPU host, in one go: a random Qwen2-shaped model (the layer shapes
# of Qwen2.5-0.5B, ~0.4B parameters with this project's vocabulary) in bf16, no weights needed.
# Quick versions (a few minutes); pass --full for the long ones. Writes benchmarks/results/*_cuda.json.
# Written for CUDA but not run here: the machines this project was built on have no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
"$PY" -m pip install -q -e '.[bench]'
"$PY" -m benchmarks.perf_rollout --device cuda --threads 4 "$@"
"$PY" -m benchmarks.perf_update --device cuda --threads 4 "$@"
"$PY" -m benchmarks.perf_trl --device cuda --threads 4 "$@"
