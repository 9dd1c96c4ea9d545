# Sourced by the Ray scripts here: token auth unless the caller asks for none (RAY_AUTH_MODE=disabled).
# Ray's gRPC servers listen on every interface whatever --node-ip-address says, so without a token any
# process that reaches this machine could join the cluster and run tasks as this user.
# ray_auth DIR: the token in DIR/auth_token (made 0600 when missing) unless RAY_AUTH_TOKEN or
# RAY_AUTH_TOKEN_PATH names one; clients use the same file:
#   RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=DIR/auth_token agent-r1 train ... --set ray.address=...
ray_auth() {
  if [ "${RAY_AUTH_MODE:-token}" = "disabled" ]; then
    export RAY_AUTH_MODE=disabled
    echo "Ray token auth is off (RAY_AUTH_MODE=disabled): use a trusted or firewalled host" >&2
    return 0
  fi
  export RAY_AUTH_MODE=token
  if [ -n "${RAY_AUTH_TOKEN:-}" ] || [ -n "${RAY_AUTH_TOKEN_PATH:-}" ]; then return 0; fi
  mkdir -p "$1"
  local token="$1/auth_token"
  if [ -e "$token" ] || [ -L "$token" ]; then
    if [ -L "$token" ] || [ ! -O "$token" ] || [ "$(stat -c %a "$token")" != 600 ]; then
      echo "Ray token file $token is a link, not yours or readable by others: delete it (a new one is made) or chmod 600 it" >&2
      return 1
    fi
  else
    (umask 077 && set -o noclobber && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$token")
  fi
  export RAY_AUTH_TOKEN_PATH="$token"
}
