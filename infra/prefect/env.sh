# Sourced by the scripts here: Prefect state inside the project, no analytics (no network), time for
# the API to come up on 2 cores, the local server's address.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PREFECT_HOME="${PREFECT_HOME:-$ROOT/.prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="${PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS:-300}"
export PREFECT_PORT="${PREFECT_PORT:-4200}"
export PREFECT_API_URL="${PREFECT_API_URL:-http://127.0.0.1:$PREFECT_PORT/api}"
# Whoever can create a flow run of train-agent makes this machine train (flows/steps.py refuses
# parameters that name code or commands): every API call needs a credential, and only the server's
# own page may call it from a browser. The credential: PREFECT_SERVER_API_AUTH_STRING or
# PREFECT_API_AUTH_STRING ('user:password') when given, else one generated once into a file only
# this user can read; it is never printed. `source infra/prefect/env.sh` gives a shell the client side.
AUTH_FILE="${AGENT_R1_PREFECT_AUTH_FILE:-$PREFECT_HOME/api_auth}"
AUTH_SOURCE="the environment's PREFECT_SERVER_API_AUTH_STRING / PREFECT_API_AUTH_STRING"
if [ -z "${PREFECT_SERVER_API_AUTH_STRING:-}${PREFECT_API_AUTH_STRING:-}" ]; then
  if [ ! -s "$AUTH_FILE" ]; then
    mkdir -p "$(dirname "$AUTH_FILE")"
    (umask 077 && printf 'agent-r1:%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$AUTH_FILE")
  fi
  if [ -n "$(find "$AUTH_FILE" -perm /077 2>/dev/null)" ] || [ ! -O "$AUTH_FILE" ]; then
    echo "the Prefect API credential file $AUTH_FILE is readable by others or not yours: chmod 600 it" \
      "(and make it yours), or delete it to get a new one" >&2
    return 1 2>/dev/null || exit 1
  fi
  PREFECT_API_AUTH_STRING="$(cat "$AUTH_FILE")"
  AUTH_SOURCE="the contents of $AUTH_FILE"
fi
export PREFECT_API_AUTH_STRING="${PREFECT_API_AUTH_STRING:-$PREFECT_SERVER_API_AUTH_STRING}"
export PREFECT_SERVER_API_AUTH_STRING="${PREFECT_SERVER_API_AUTH_STRING:-$PREFECT_API_AUTH_STRING}"
# CORS: the UI is served from the API's own origin; no other page may call the API from a browser
# (the default, `*`, let any web page create flow runs). Both of Prefect's names are set, so an
# older one left in the environment cannot widen it.
export PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS="http://127.0.0.1:$PREFECT_PORT"
export PREFECT_SERVER_CORS_ALLOWED_ORIGINS="$PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS"
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
