#!/usr/bin/env bash
# Serves deployment train-agent/local against the local server (infra/prefect/server.sh).
# Then: prefect deployment run train-agent/local --watch
set -euo pipefail
source "$(dirname "$0")/env.sh"
wait_for_prefect
exec python -m flows.serve "$@"
