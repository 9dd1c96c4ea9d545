"""`python -m agent_r1.tracking flush|status`: show or send what the buffer holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent_r1.tracking.channel import _Channel
from agent_r1.tracking.location import default_artifact_root, default_buffer_dir, default_tracking_uri


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agent_r1.tracking", description="the MLflow record buffer")
    p.add_argument("action", choices=["flush", "status"])
    p.add_argument("--buffer", default=None, help="buffer folder (default <project>/mlruns/buffer)")
    p.add_argument("--tracking-uri", default=None)
    args = p.parse_args(argv)
    buffer = Path(args.buffer) if args.buffer else default_buffer_dir()
    uri = args.tracking_uri or default_tracking_uri()
    channel = _Channel(uri, default_artifact_root(uri), buffer)
    if args.action == "flush":
        ok = channel.flush(wait_s=None)  # another process flushing this buffer: wait for it, then go on
        print(json.dumps(channel.report(), indent=1))
        return 0 if ok else 1
    print(json.dumps(channel.report(), indent=1))
    return 0
