"""Atomic, durable, safe checkpoints.

A folder `iter_000010/` holds the policy (save_pretrained), `state.pt` with optimiser, critic, RNG
states, the data position and the iteration, and `manifest.json` (every file's size and sha256). It is written
to a temporary folder, fsynced (files, then the folder), renamed into place, and the parent folder
is fsynced; `latest` names the newest complete checkpoint and is replaced the same way. So a kill
or a power cut at any moment leaves a usable checkpoint. A save that fails (a full disk) removes its
temporary folder and leaves the previous checkpoint as it was; a full disk raises DiskFullError.

`state.pt` holds tensors and plain data only (dicts, lists, ints, floats, str) and is always read
with `torch.load(weights_only=True)`: run folders travel between machines and as MLflow artifacts,
and an unpickler that may call anything would run whatever a crafted file asks. A file that needs
more is refused with `UnsafeCheckpointError`, naming it; its payload never runs.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import random
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)

STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
POINTER_FILE = "latest"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used."""


class UnsafeCheckpointError(CheckpointError):
    """state.pt needs more than tensors and plain data to load: never unpickled."""


class CorruptCheckpointError(CheckpointError):
    """A truncated or unreadable checkpoint (a kill or a full disk while it was copied)."""


class NoCheckpointError(CheckpointError):
    """`--resume` found nothing to resume from."""


#: a write that found no room: the disk is full, or the user's quota is spent
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS


class DiskFullError(RuntimeError):
    """A write of the run found its disk full: the run stops; the last complete checkpoint is intact.
    A RuntimeError, so the CLI prints it as the one-line error it is, not a traceback."""

    def __init__(self, folder: str | Path, run: str | Path | None = None, where: str | None = None):
        self.folder, self.run = Path(folder), run
        resume = f"`agent-r1 train --resume {run}`" if run else "--resume"
        super().__init__(f"no space left on the disk holding {where or folder}: the run stopped and its last "
                         f"complete checkpoint is intact; free space, then resume with {resume}")


# --- RNG state as tensors and plain data ---------------------------------------------------------

def rng_state() -> dict[str, Any]:
    """Python, numpy, torch (and CUDA) generator states, as tensors / ints / floats only."""
    version, internal, gauss_next = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": int(version), "state": torch.tensor(internal, dtype=torch.int64),
                   "gauss_next": gauss_next},
        "numpy": {"bit_generator": str(name), "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state((npy["bit_generator"], npy["keys"].numpy().astype(np.uint32), npy["pos"],
                         npy["has_gauss"], npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


# --- durable writes ------------------------------------------------------------------------------

def fsync_path(path: Path) -> None:
    """fsync a file or (on POSIX) a folder, so a rename that follows is not reordered before the data."""
    if path.is_dir() and os.name != "posix":
        return  # folders cannot be opened for fsync on Windows; NTFS journals renames itself
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    for sub in sorted(folder.rglob("*"), reverse=True):  # files before the folders that hold them
        fsync_path(sub)
    fsync_path(folder)


def write_text_durably(path: Path, text: str) -> None:
    """Replaces `path` atomically with `text`: temp file, fsync, rename, fsync the folder."""
    tmp = path.parent / f".{path.name}.tmp_{os.getpid()}"
    try:
        tmp.write_text(text)
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a partial temp file would only take space
        raise
    fsync_path(path.parent)


# --- save ----------------------------------------------------------------------------------------

def save_checkpoint(root: str | Path, iteration: int, model: Any, tokenizer: Any, state: dict[str, Any],
                    keep: int = 2) -> Path:
    """Writes checkpoint `iteration` under `root` and points `latest` at it. On any failure the temporary
    folder is removed and the checkpoints already there are as they were; a full disk is DiskFullError."""
    root = Path(root)
    final = root / f"iter_{iteration:06d}"
    tmp = root / f".tmp_iter_{iteration:06d}_{os.getpid()}"
    stale = root / f".stale_{final.name}_{os.getpid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _write_checkpoint(tmp, iteration, model, tokenizer, state)
        _move_into_place(tmp, final, stale)
        write_text_durably(root / POINTER_FILE, final.name)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)  # a half-written save only takes the space a resume needs
        if is_disk_full(err):
            raise DiskFullError(root) from err
        raise
    shutil.rmtree(stale, ignore_errors=True)
    _prune(root, keep, final)
    return final


def _write_checkpoint(tmp: Path, iteration: int, model: Any, tokenizer: Any, state: dict[str, Any]) -> None:
    """Every file of the checkpoint and its manifest into `tmp`, fsynced."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save({**state, "iteration": iteration, "rng": rng_state()}, tmp / STATE_FILE)
    # fail in the run that wrote it, not at a resume days later, if someone adds an object to the state
    _read_state_file(tmp / STATE_FILE, mmap=True)
    files = [p for p in sorted(tmp.rglob("*")) if p.is_file()]
    sizes = {str(p.relative_to(tmp)): p.stat().st_size for p in files}
    digests = {str(p.relative_to(tmp)): file_sha256(p) for p in files}
    (tmp / MANIFEST_FILE).write_text(json.dumps({"iteration": iteration, "sizes": sizes, "sha256": digests},
                                                indent=1))
    _fsync_tree(tmp)


def _move_into_place(tmp: Path, final: Path, stale: Path) -> None:
    """Renames the complete `tmp` to `final`. The same iteration saved again moves the old copy aside
    first, and back if the rename fails: never neither."""
    if final.exists():
        os.replace(final, stale)
    try:
        os.replace(tmp, final)
    except BaseException:
        if stale.exists() and not final.exists():
            os.replace(stale, final)
        raise
    fsync_path(final.parent)


# --- find and load -------------------------------------------------------------------------------

def _read_state_file(file: Path, mmap: bool = False) -> dict[str, Any]:
    """torch.load with weights_only=True; `mmap` checks the structure without reading tensor data.
    Only torch.save's zip archives are ever unpickled: a raw pickle is refused unread."""
    if not file.is_file():
        raise CorruptCheckpointError(f"{file} is missing")
    with file.open("rb") as f:
        head = f.read(4)
    if head[:1] == b"\x80":  # a pickle protocol marker: a raw pickle (or torch's legacy format), never ours
        raise UnsafeCheckpointError(_refusal(file, "it is a raw pickle, not a torch.save archive"))
    if not zipfile.is_zipfile(file):  # a truncated archive loses its central directory, at the end
        raise CorruptCheckpointError(f"{file} is truncated or corrupt: not a complete torch.save archive")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as e:
        wanted = re.search(r"GLOBAL (\S+) was not an allowed global", str(e))
        raise UnsafeCheckpointError(_refusal(file, f"it asks for {wanted.group(1)}" if wanted else
                                             "it holds pickle instructions torch's safe loader refuses")) from None
    except Exception as e:  # noqa: BLE001  (an untrusted file: any failure to parse it means corrupt)
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise CorruptCheckpointError(f"{file} is truncated or corrupt: {type(e).__name__}: {first}") from e
    if not isinstance(state, dict) or "iteration" not in state:
        raise CorruptCheckpointError(f"{file} holds no checkpoint state (a dict with an 'iteration')")
    return state


def _refusal(file: Path, reason: str) -> str:
    return (f"refusing to load {file}: {reason}; a file that needs more than tensors and plain data to load "
            "could run code. agent-r1 writes tensors and plain data only (checkpoints from versions before safe "
            "checkpoints held numpy arrays and cannot be resumed); if this file came from elsewhere, delete its "
            "checkpoint folder and resume from another checkpoint.")


def load_state(path: str | Path) -> dict[str, Any]:
    """The state of checkpoint folder `path`, loaded with weights_only=True."""
    return _read_state_file(Path(path) / STATE_FILE)


def file_sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_checkpoint(path: str | Path) -> int:
    """Raises CorruptCheckpointError / UnsafeCheckpointError unless checkpoint `path` is usable;
    returns its iteration. Every file is checked against the manifest by size (cheap: truncation)
    and by sha256 (damage that keeps the size: overwritten header bytes would pass a size check and
    fail at load, with no fallback), then state.pt's structure (memory-mapped)."""
    path = Path(path)
    manifest = path / MANIFEST_FILE
    if manifest.exists():  # checkpoints written before manifests existed are checked by state.pt alone
        try:
            recorded = json.loads(manifest.read_text())
            sizes, digests = recorded["sizes"], recorded.get("sha256", {})  # sha256: absent in older manifests
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptCheckpointError(f"{manifest} is unreadable: {e}") from e
        for name, size in sizes.items():
            f = path / name
            actual = f.stat().st_size if f.is_file() else None
            if actual != size:
                raise CorruptCheckpointError(f"{f} is truncated or missing: {actual} bytes, the manifest says {size}")
        for name, digest in digests.items():
            if file_sha256(path / name) != digest:
                raise CorruptCheckpointError(f"{path / name} is damaged: its sha256 differs from the manifest's")
    return int(_read_state_file(path / STATE_FILE, mmap=True)["iteration"])


def checkpoint_candidates(root: str | Path) -> list[Path]:
    """Complete checkpoint folders (with a state.pt), the one `latest` names first, then newest first.
    Stray temporary folders are ignored."""
    root = Path(root)
    done = sorted((p for p in root.glob("iter_*") if (p / STATE_FILE).exists()), reverse=True)
    pointer = root / POINTER_FILE
    named = root / pointer.read_text().strip() if pointer.is_file() else None
    if named in done:
        done.remove(named)
        done.insert(0, named)
    return done


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest usable checkpoint, or None. A truncated or corrupt one is skipped with a warning
    (falling back to the previous one); a file that is not safe to load raises UnsafeCheckpointError."""
    for path in checkpoint_candidates(root):
        try:
            check_checkpoint(path)
            return path
        except CorruptCheckpointError as e:
            log.warning("checkpoint %s is unusable (%s); falling back to the previous checkpoint", path, e)
    return None


def restore_master_weights(model: Any, path: str | Path) -> int:
    """Puts the checkpoint's own values back into a policy loaded from it in a narrower dtype.

    A bf16 full fine-tune trains float32 master weights (`place_policy`) and saves them in float32;
    loading that folder in `model.dtype` (bfloat16) rounds every weight, so at lr 1e-6 a resume
    undid 99% of the moves while Adam's state carried on. Every parameter the folder holds in a
    wider float dtype gets those values (in that dtype: `place_policy` keeps float32 masters as
    they are); buffers and narrower tensors stay as loaded. Returns how many were restored."""
    from safetensors import safe_open

    params = dict(model.named_parameters())
    restored = 0
    for file in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():
                p = params.get(name)
                if p is None or not p.dtype.is_floating_point:
                    continue
                saved = f.get_tensor(name)
                if saved.dtype.is_floating_point and saved.dtype.itemsize > p.dtype.itemsize:
                    p.data = saved.to(p.device)
                    restored += 1
    return restored


def checkpoint_iteration(path: str | Path) -> int:
    return check_checkpoint(path)


def _left_by_us_or_the_dead(folder: Path) -> bool:
    """A temp folder (`.tmp_iter_N_<pid>`, `.stale_iter_N_<pid>`) of this process, or of a process
    that no longer runs on this machine (killed mid-save). One whose pid cannot be read is left."""
    pid = folder.name.rsplit("_", 1)[-1]
    if not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def _prune(root: Path, keep: int, final: Path) -> None:
    """Keeps the `keep` newest checkpoints up to `final`, the one just saved (always kept).

    Checkpoints named after `final` are from a line the run abandoned: a resume skipped them as
    corrupt and fell back to an older one. Counting them by name would keep the corrupt one and
    delete the good ones, `final` included, leaving `latest` naming a deleted folder. They are left
    alone until the run saves that iteration again, which replaces them."""
    for stale in (*root.glob(".tmp_iter_*"), *root.glob(".stale_iter_*")):
        if _left_by_us_or_the_dead(stale):  # another live trainer's save in progress is not ours to delete
            shutil.rmtree(stale, ignore_errors=True)
    if keep <= 0:
        return
    done = sorted(p for p in root.glob("iter_*") if (p / STATE_FILE).exists() and p.name <= final.name)
    for old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
