#!/usr/bin/env bash
# A local Prefect server (API + UI) on 127.0.0.1:${PREFECT_PORT:-4200}; state in .prefect/. Every API
# call needs the credential env.sh sets (the UI asks for it: the contents of .prefect/api_auth), and
# only the server's own page may call it from a browser (docs/security.md).
set -euo pipefail
source "$(dirname "$0")/env.sh"
echo "Prefect UI and API: http://127.0.0.1:$PREFECT_PORT (PREFECT_HOME=$PREFECT_HOME)"
echo "API credential (the UI's login; clients: source infra/prefect/env.sh): $AUTH_SOURCE"
exec prefect server start --host 127.0.0.1 --port "$PREFECT_PORT"
