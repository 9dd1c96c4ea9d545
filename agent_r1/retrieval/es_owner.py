"""Whose Elasticsearch index is it: agent-r1's marker, and which index folder made it.

Every index agent-r1 creates carries, in its mapping's `_meta` (kept by Elasticsearch as it is):
`created_by: agent-r1` (so `agent-r1 index` never drops an index another application made) and `owner`,
the index folder that made it (host and absolute path of the folder holding retriever.json). Two
projects on one server both default to the same index name: without the owner, the second project's
build passed the marker check and replaced the first one's corpus, whose searches then silently
returned the second corpus. Now a rebuild from another folder is refused (unless --overwrite), and a
folder whose index another folder has since rebuilt is told so when it opens it.

Indexes made before owners were recorded carry the marker alone: any agent-r1 folder may rebuild them.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

# Written into every index we create: only an index carrying it is deleted on a rebuild without
# `overwrite`, so `agent-r1 index --index-name NAME` never drops someone else's index.
AGENT_R1_MARKER: dict[str, Any] = {"created_by": "agent-r1"}


def made_by_agent_r1(mappings: dict[str, Any]) -> bool:
    """Whether one index's `mappings` (as GET /<index>/_mapping reports it) carries our marker."""
    meta = mappings.get("_meta") if isinstance(mappings, dict) else None
    return isinstance(meta, dict) and all(meta.get(k) == v for k, v in AGENT_R1_MARKER.items())


def owner_of(index_dir: str | Path | None) -> str:
    """The owner an index folder writes: `<host>:<absolute folder>` ("" without a folder: library use)."""
    return f"{socket.gethostname()}:{Path(index_dir).resolve()}" if index_dir else ""


def recorded_owner(mappings: dict[str, Any]) -> str | None:
    """The owner an index records, or None (made before owners were recorded, or not by agent-r1)."""
    meta = mappings.get("_meta") if isinstance(mappings, dict) else None
    owner = meta.get("owner") if isinstance(meta, dict) else None
    return owner if isinstance(owner, str) else None


def with_owner(mapping: dict[str, Any], owner: str) -> dict[str, Any]:
    """`mapping` with our marker and `owner` in its `_meta` (a new dict; the caller's is not changed)."""
    return {**mapping, "_meta": {**mapping.get("_meta", {}), **AGENT_R1_MARKER, "owner": owner}}


def replace_refusal(existing: dict[str, Any], owner: str, index_name: str, url: str) -> str | None:
    """Why the indexes behind `index_name` ({name: mappings}) may not be dropped by `owner` without
    `--overwrite`, or None when they may."""
    foreign = sorted(name for name, m in existing.items() if not made_by_agent_r1(m))
    if foreign:
        return (f"Elasticsearch index {index_name!r} at {url} already exists and was not made by agent-r1 (no "
                f"_meta.created_by = 'agent-r1' in the mapping of {', '.join(foreign)}); refusing to delete it. "
                "Pick another --index-name, or pass --overwrite to replace it (its documents are lost)")
    others = sorted({o for o in map(recorded_owner, existing.values()) if o is not None and o != owner})
    if others:
        return (f"Elasticsearch index {index_name!r} at {url} belongs to another agent-r1 index folder "
                f"({', '.join(others)}), maybe another project's; refusing to replace its corpus. Pick another "
                "index name (--index-name, search.index_name), or pass --overwrite to replace it (that folder's "
                "searches then fail until it is rebuilt)")
    return None


def opened_refusal(mappings: dict[str, Any], owner: str, index_name: str, url: str) -> str | None:
    """Why a folder may not search the index it names (another folder has rebuilt it), or None."""
    recorded = recorded_owner(mappings)
    if recorded is None or not owner or recorded == owner:
        return None
    return (f"Elasticsearch index {index_name!r} at {url} was rebuilt by another index folder ({recorded}); "
            f"it no longer holds this folder's corpus. rebuild it here with `agent-r1 index` under another "
            f"--index-name (and set search.index_name), so two projects do not share one index")
