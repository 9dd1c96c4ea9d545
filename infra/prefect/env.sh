# Sourced by the scripts here: Prefect state inside the project, no analytics (no network), time for
# the API to come up on 2 cores, the local server's address.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PREFECT_HOME="${PREFECT_HOME:-$ROOT/.prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="${PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS:-300}"
export PREFECT_PORT="${PREFECT_PORT:-4200}"
export PREFECT_API_URL="${PREFECT_API_URL:-http://127.0.0.1:$PREFECT_PORT/api}"
export MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=1
export PATH="$ROOT/.venv/bin:$PATH"
export AGENT_R1_ROOT="$ROOT"   # prefect.yaml: the folder a worker runs flow runs in
cd "$ROOT"

wait_for_prefect() {  # the first start runs database migrations: give it minutes, not seconds
  for _ in $(seq 1 300); do
    curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "no Prefect API at $PREFECT_API_URL (start infra/prefect/server.sh first)" >&2
  return 1
}
