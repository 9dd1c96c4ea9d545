"""Token auth for the trainer's own local Ray.

Ray's gRPC servers (GCS, raylet, workers) listen on every interface whatever the node address, and
`ray.init` replaces a loopback node address with the machine's reachable one: without auth, any
process that reaches the machine could join the cluster and run tasks as the training user. So a
local Ray starts with Ray's token auth (RAY_AUTH_MODE=token), the token in a private file inside
Ray's temp folder (the project's `.ray/`, never ~/.ray), unless `ray.insecure: true` says otherwise.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

TOKEN_FILE = "auth_token"


def private_token(folder: str | Path) -> Path:
    """`<folder>/auth_token`, made (0600) when missing; refused when others can read it or it is not
    this user's (a token others read is no token). Processes of this user sharing the folder share it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TOKEN_FILE
    try:  # O_EXCL + O_NOFOLLOW: never write through a link someone else planted
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise PermissionError(f"Ray token file {path} is readable by others, not a plain file or not yours: "
                                  "delete it (a new one is made) or chmod 600 it; ray.temp_dir picks another "
                                  "folder") from None
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def set_local_auth(temp_dir: str, insecure: bool) -> None:
    """The environment a local `ray.init` (and every Ray process it starts) reads its auth from.
    A token the user gave (RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH) is used as it is."""
    if insecure:
        os.environ["RAY_AUTH_MODE"] = "disabled"
    else:
        if not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
            os.environ["RAY_AUTH_TOKEN_PATH"] = str(private_token(temp_dir))
        os.environ["RAY_AUTH_MODE"] = "token"
    _reload_ray_config()


def follow_environment() -> None:
    """Before joining a cluster: this process's auth mode as RAY_AUTH_MODE says now. A local Ray
    started earlier in the process left it in token mode, and the driver would then demand a token
    from the workers of a cluster that runs without auth (its actors die calling back)."""
    _reload_ray_config()


def _reload_ray_config() -> None:
    """This process's Ray reads the auth mode once into its cached config; an earlier Ray of the same
    process (tests, a notebook) would keep the old mode. Re-read it, as Ray's own token setup does."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
