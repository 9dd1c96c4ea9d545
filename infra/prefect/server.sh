#!/usr/bin/env bash
# A local Prefect server (API + UI) on 127.0.0.1:${PREFECT_PORT:-4200}; state in .prefect/.
set -euo pipefail
source "$(dirname "$0")/env.sh"
echo "Prefect UI and API: http://127.0.0.1:$PREFECT_PORT (PREFECT_HOME=$PREFECT_HOME)"
exec prefect server start --host 127.0.0.1 --port "$PREFECT_PORT"
