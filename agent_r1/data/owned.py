"""Which folders agent-r1 may replace: only the ones it made.

Every folder the project puts in place with `replace_dir` (a generated dataset, an index, a warm
start) or opens as a run folder gets a marker file, `.agent-r1-made`, saying what made it. Before a
folder is replaced or written into, `check_replaceable` asks: does it not exist, is it empty, does it
carry the marker? Anything else is the user's, and is refused with its path and the fix; nothing in
it is moved, overwritten or deleted.

Folders made by versions before the marker existed have none. Each caller names the files its
older versions always wrote (`legacy`: a synthetic world's `world.json`, a task's `task.json`, a
warm start's `warm_start.json`, a run's `run.json`); a folder holding one is taken as the
project's, so existing setups keep regenerating. A user folder that merely happens to contain such a
file is the price of not breaking every existing checkout; the names are specific to agent-r1.

Some targets are refused even when empty or marked: the filesystem root, the home folder and any
folder above it, and any folder holding the repository or the working directory. A setting pointing
there is a typo, and the cost of honouring it is someone's whole home.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MARKER = ".agent-r1-made"
_SHOWN = 6  # how many of a refused folder's entries an error lists


class ForeignFolderError(RuntimeError):
    """A folder agent-r1 did not make (or must never touch) was about to be replaced or written into."""


def mark_made(folder: str | os.PathLike[str], by: str) -> None:
    """Records that agent-r1 made `folder` (`by`: the setting or step, for whoever finds it)."""
    path = Path(folder) / MARKER
    if not path.exists():
        # no time or host in it: a generated folder stays byte-identical for the same seed (DVC hashes it)
        path.write_text(json.dumps({"made_by": by, "note": "agent-r1 made this folder and may replace it"}) + "\n")


def _project_root() -> Path:
    """The folder holding the agent_r1 package (the repository in a checkout)."""
    return Path(__file__).resolve().parents[2]


def _guarded() -> list[tuple[str, Path]]:
    places = [("the working directory", Path.cwd()), ("the agent-r1 repository", _project_root())]
    try:
        places.insert(0, ("the home folder", Path.home()))
    except RuntimeError:  # no HOME and no passwd entry (some containers): nothing to guard there
        pass
    return [(what, p.resolve()) for what, p in places]


def check_not_dangerous(folder: str | os.PathLike[str], key: str) -> None:
    """Refuses `/`, the home folder, and any folder that is or holds home, the working directory or
    the repository: a setting pointing there is a mistake whose cost would be everything under it."""
    resolved = Path(folder).expanduser().resolve()
    for what, place in _guarded():
        if resolved == place or resolved in place.parents:
            where = "is" if resolved == place else "holds"
            raise ForeignFolderError(
                f"{key}={folder} {where} {what} ({place}); agent-r1 replaces what it writes there, so it refuses "
                f"that folder. Point {key} at a new or empty folder of its own (e.g. under runs/ or data/).")


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def foreign_entries(folder: Path, legacy: tuple[str, ...] = ()) -> list[str]:
    """The names in `folder` when it is someone else's; [] when it is missing, empty or ours."""
    if not folder.is_dir():
        return []
    names = sorted(p.name for p in folder.iterdir())
    if not names or MARKER in names or any(name in names for name in legacy):
        return []
    return names


def check_replaceable(folder: str | os.PathLike[str], key: str, fix: str = "",
                      legacy: tuple[str, ...] = ()) -> None:
    """Raises ForeignFolderError unless agent-r1 may replace or write into `folder` (see the module)."""
    folder = Path(folder)
    check_not_dangerous(folder, key)
    fix = fix or f"move those files elsewhere, or point {key} at an empty or new folder"
    if folder.exists() and not folder.is_dir():
        raise ForeignFolderError(f"{key}={folder} is a file, not a folder; agent-r1 never replaces it: {fix}")
    names = foreign_entries(folder, legacy)
    if names:
        raise ForeignFolderError(f"{key}={folder} holds files agent-r1 did not write ({_listing(names)}) and no "
                                 f"{MARKER} marker; it never deletes or overwrites those: {fix}")


def made_by(folder: str | os.PathLike[str]) -> str | None:
    """What the marker of `folder` says made it ("" when unreadable), or None without a marker."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return None
    try:
        by = json.loads(path.read_text()).get("made_by")
    except (OSError, ValueError, AttributeError):
        return ""
    return by if isinstance(by, str) else ""


def claim_folder(folder: str | os.PathLike[str], key: str, fix: str, by: str,
                 legacy: tuple[str, ...] = (), also: tuple[str, ...] = ()) -> Path:
    """For a command that writes files by name into `folder`: refuses a folder of someone else's
    (check_replaceable) and a folder another command made (its marker names a maker other than `by`
    or those in `also`: one command's output is never written over by another's), then creates and
    marks it as made by `by`."""
    check_replaceable(folder, key, fix, legacy)
    path = Path(folder)
    maker = made_by(path)
    if maker is not None and maker not in (by, *also):
        raise ForeignFolderError(f"{key}={folder} was made by {maker or 'an unreadable marker'!r}, not by {by!r}; "
                                 f"it never writes over another command's output: {fix}")
    path.mkdir(parents=True, exist_ok=True)
    mark_made(path, by)
    return path
