#!/usr/bin/env bash
# The MLflow UI/tracking server on 127.0.0.1:${MLFLOW_PORT:-5000} over the project's SQLite store
# (mlruns/mlflow.db, artifacts in mlruns/artifacts): the store `make run` and the flow write to.
# To log through the server instead of the file: export MLFLOW_TRACKING_URI=http://127.0.0.1:5000
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PORT="${MLFLOW_PORT:-5000}"
mkdir -p "$ROOT/mlruns/artifacts"
export MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=1
echo "MLflow UI: http://127.0.0.1:$PORT (store: $ROOT/mlruns/mlflow.db; first start takes ~30 s)"
exec "$ROOT/.venv/bin/mlflow" server --host 127.0.0.1 --port "$PORT" --workers 1 \
  --backend-store-uri "sqlite:///$ROOT/mlruns/mlflow.db" \
  --artifacts-destination "$ROOT/mlruns/artifacts"
