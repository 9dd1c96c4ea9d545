#!/usr/bin/env bash
# A two-node Ray cluster on one machine (a head and a second raylet), to try multi-node placement
# and node loss without a second machine; tests/integration/test_ray_cluster.py starts the same two processes.
#
#   infra/ray/start-two-nodes.sh             # head (3 CPUs) + node2 (1 CPU), pids in $TEMP_DIR/*.pid
#   RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/tmp/agent-r1-2n-$(id -u)/auth_token \
#     agent-r1 train --params params.yaml --set ray.enabled=true \
#       --set ray.address=127.0.0.1:6380 --set ray.num_workers=2
#   infra/ray/start-two-nodes.sh kill-node2  # the second node dies (SIGKILL): its worker restarts on the head
#   infra/ray/start-two-nodes.sh stop        # stops these two nodes only (never `ray stop`: that stops every Ray here)
#
# Each node runs `ray start --block` in a session of its own, so one process group is one node.
# The head has room for the learner and both workers (3 CPUs), so the run survives losing node2.
# Ray advertises the machine's routable IP even with --node-ip-address=127.0.0.1, and its gRPC
# servers listen on every interface: token auth is on (infra/ray/auth.sh; RAY_AUTH_MODE=disabled turns
# it off, for a trusted or firewalled host only).
set -euo pipefail
cd "$(dirname "$0")/../.."
RAY="${RAY:-.venv/bin/ray}"
PORT="${RAY_PORT:-6380}"
TEMP_DIR="${RAY_TEMP_DIR:-/tmp/agent-r1-2n-$(id -u)}"  # socket paths must stay short
export RAY_USAGE_STATS_ENABLED=0 RAY_worker_niceness=0
. infra/ray/auth.sh
ray_auth "$TEMP_DIR"
# a silent node is declared dead after ~3 s instead of ~15 s
export RAY_health_check_period_ms=1000 RAY_health_check_timeout_ms=1000 RAY_health_check_failure_threshold=3

stop_node() {  # $1: head | node2
  local pidfile="$TEMP_DIR/$1.pid"
  [ -f "$pidfile" ] || return 0
  local pgid; pgid="$(cat "$pidfile")"
  kill "-${2:-TERM}" -- "-$pgid" 2>/dev/null || true
  # the GCS may outlive a SIGTERM for a long while: after 10 s the group gets SIGKILL
  for _ in $(seq 10); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pgid" 2>/dev/null || true
  rm -f "$pidfile"
}

case "${1:-start}" in
  start)
    mkdir -p "$TEMP_DIR"
    setsid "$RAY" start --block --head --node-ip-address=127.0.0.1 --port="$PORT" --num-cpus="${HEAD_CPUS:-3}" \
      --temp-dir="$TEMP_DIR" --include-dashboard=false --disable-usage-stats >"$TEMP_DIR/head.log" 2>&1 &
    echo $! >"$TEMP_DIR/head.pid"
    until "$RAY" status --address="127.0.0.1:$PORT" >/dev/null 2>&1; do sleep 1; done
    setsid "$RAY" start --block --address="127.0.0.1:$PORT" --node-ip-address=127.0.0.1 \
      --num-cpus="${NODE_CPUS:-1}" --disable-usage-stats >"$TEMP_DIR/node2.log" 2>&1 &
    echo $! >"$TEMP_DIR/node2.pid"
    until [ "$("$RAY" status --address="127.0.0.1:$PORT" 2>/dev/null | grep -c ' node_')" -ge 2 ]; do sleep 1; done
    echo "two nodes up at 127.0.0.1:$PORT (logs and pids in $TEMP_DIR)"
    ;;
  kill-node2) stop_node node2 KILL ;;
  stop) stop_node node2; stop_node head ;;
  *) echo "usage: $0 [start|kill-node2|stop]" >&2; exit 2 ;;
esac
