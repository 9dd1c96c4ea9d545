#!/usr/bin/env bash
# The work-pool alternative to serve.sh: a `process` work pool, the deployment from prefect.yaml,
# and a worker that runs each flow run as a subprocess in the project root.
set -euo pipefail
source "$(dirname "$0")/env.sh"
POOL="${PREFECT_POOL:-local-process}"
# the params file prefect.yaml's deployment serves; a flow run naming another is refused (flows/steps.py)
export AGENT_R1_SERVED_PARAMS="${AGENT_R1_SERVED_PARAMS:-$ROOT/params.yaml}"
wait_for_prefect
prefect work-pool inspect "$POOL" >/dev/null 2>&1 || prefect work-pool create "$POOL" --type process
prefect --no-prompt deploy --all
exec prefect worker start --pool "$POOL" --limit 1
