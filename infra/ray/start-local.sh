#!/usr/bin/env bash
# A one-machine Ray "cluster" for `agent-r1 train` with ray.address set (the default,
# ray.address: "", needs none of this: the trainer starts Ray in-process).
#
#   infra/ray/start-local.sh                 # start the head (2 CPUs, no dashboard)
#   RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=.ray/auth_token agent-r1 train --params params.yaml \
#       --set ray.enabled=true --set ray.address=127.0.0.1:6379
#   infra/ray/start-local.sh stop
#
# Token auth is on (infra/ray/auth.sh: the token in the temp folder, 0600; RAY_AUTH_MODE=disabled
# turns it off, for a trusted host only); temp files stay in <project>/.ray.
set -euo pipefail
cd "$(dirname "$0")/../.."
RAY="${RAY:-.venv/bin/ray}"
export RAY_USAGE_STATS_ENABLED=0
TEMP_DIR="${RAY_TEMP_DIR:-$PWD/.ray}"
if [ ${#TEMP_DIR} -gt 40 ]; then TEMP_DIR="/tmp/agent-r1-ray-$(id -u)"; fi  # socket paths must stay short
. infra/ray/auth.sh
ray_auth "$TEMP_DIR"

if [ "${1:-start}" = "stop" ]; then
  exec "$RAY" stop
fi
exec "$RAY" start --head --node-ip-address=127.0.0.1 --port="${RAY_PORT:-6379}" \
  --num-cpus="${RAY_NUM_CPUS:-$(nproc)}" --include-dashboard=false \
  --temp-dir="$TEMP_DIR" --disable-usage-stats
