"""Which files of a folder may be uploaded or copied: its regular files, never through a symlink.

A checkpoint folder is the run's own, but a link in it may point anywhere (a home folder's `.ssh`): a
link to a file or a folder is skipped, so nothing outside the run's own folders reaches MLflow or the
offline buffer's copy. The folder named itself must not be a link either.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from agent_r1.tracking.records import BadRecord


def artifact_files(root: str | Path, only: list[str] | None = None) -> list[Path]:
    """The regular files under `root` (relative paths, sorted), links to files or folders left out; a
    file `root` gives itself. With `only` (e.g. the files a checkpoint's manifest lists), just those of
    them. Raises BadRecord for a `root` that is a link or missing."""
    root = Path(root)
    if root.is_symlink():
        raise BadRecord(f"{root} is a symbolic link: not uploaded (only a run's own files are)")
    if root.is_file():
        return [Path(root.name)]
    if not root.is_dir():
        raise BadRecord(f"the artifact {root} is gone")
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)))
        for name in files:
            path = Path(folder, name)
            if not path.is_symlink() and path.is_file():
                found.append(path.relative_to(root))
    if only is not None:
        wanted = {Path(f) for f in only}
        found = [f for f in found if f in wanted]
    return sorted(found)


def copy_artifact(src: str | Path, dest: str | Path, only: list[str] | None = None) -> None:
    """Copies the files `artifact_files(src, only)` lists from folder `src` into a new folder `dest`."""
    src, dest = Path(src), Path(dest)
    dest.mkdir(parents=True)
    for rel in artifact_files(src, only):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dest / rel, follow_symlinks=False)
