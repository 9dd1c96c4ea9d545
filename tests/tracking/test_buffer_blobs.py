"""The offline MLflow buffer uploads and deletes only its own copies (`<buffer>/blobs/<rid>`).

A pending `artifacts` record is read from a file anyone can edit (or that a crafted run folder
brings along); its `local_path` is data, not a permission. Taken as a permission, a record naming a home
folder with `"blob": true` would have that folder uploaded, then deleted, even when it is rejected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.tracking.adapter import MlflowAdapter
from agent_r1.tracking.buffer import BadRecord, RecordBuffer


class _FakeMlflow:
    """Stands in for MLflow's side of the adapter: notes what would be uploaded; `refuse` makes it
    reject artifacts."""

    def __init__(self, refuse: bool = False):
        self.uploaded: list[Path] = []
        self.refuse = refuse

    def send(self, record):
        if record["op"] == "artifacts":
            path = Path(record["local_path"])
            self.uploaded.append(path / record["file_name"] if record.get("file_name") else path)
            if self.refuse:
                raise BadRecord("refused by the fake MLflow")
        return None


def _channel(buffer_dir: Path, refuse: bool = False) -> tuple[MlflowAdapter, _FakeMlflow]:
    RecordBuffer(buffer_dir).remember("run-key", "mlflow-run-id")  # the run exists in MLflow
    channel = MlflowAdapter("sqlite:///unused.db", None, buffer_dir, verbose=False)
    channel.send = (fake := _FakeMlflow(refuse)).send
    return channel, fake


def _victim(tmp_path: Path) -> Path:
    home = tmp_path / "home" / "someone"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    return home


def _pending(buffer_dir: Path, record: dict) -> None:
    buffer_dir.mkdir(parents=True, exist_ok=True)
    with (buffer_dir / "pending.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")


@pytest.mark.parametrize("refuse", [False, True], ids=["accepted", "rejected"])
def test_a_record_naming_a_foreign_folder_is_neither_uploaded_nor_deleted(tmp_path, refuse):
    buffer_dir = tmp_path / "mlruns" / "buffer"
    home = _victim(tmp_path)
    _pending(buffer_dir, {"op": "artifacts", "key": "run-key", "local_path": str(home), "blob": True,
                          "rid": "a" * 32})
    channel, fake = _channel(buffer_dir, refuse)
    channel.flush()
    assert (home / ".ssh" / "id_rsa").read_text() == "PRIVATE KEY"
    assert fake.uploaded == []
    rejected = [json.loads(line) for line in (buffer_dir / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 1 and str(home) in rejected[0]["error"] and "blobs" in rejected[0]["error"]
    assert channel.buffer.pending() == []


def test_a_blob_path_that_climbs_out_of_the_buffer_is_refused(tmp_path):
    buffer_dir = tmp_path / "mlruns" / "buffer"
    home = _victim(tmp_path)
    # names blobs/<rid> by its last two parts, yet resolves elsewhere
    sneaky = buffer_dir / "blobs" / ".." / ".." / ".." / "home" / "someone"
    _pending(buffer_dir, {"op": "artifacts", "key": "run-key", "local_path": str(sneaky), "blob": True,
                          "rid": "../../../home/someone"})
    channel, fake = _channel(buffer_dir)
    channel.flush()
    assert (home / ".ssh" / "id_rsa").exists() and fake.uploaded == []


def test_a_record_without_a_blob_is_not_uploaded_from_anywhere(tmp_path):
    """Buffered artifacts are always copied into blobs/ when buffered; a pending record that is not
    one came from elsewhere, and uploading its path would publish any file on the machine."""
    buffer_dir = tmp_path / "mlruns" / "buffer"
    home = _victim(tmp_path)
    _pending(buffer_dir, {"op": "artifacts", "key": "run-key", "local_path": str(home / ".ssh"), "rid": "b" * 32})
    channel, fake = _channel(buffer_dir)
    channel.flush()
    assert fake.uploaded == [] and (home / ".ssh" / "id_rsa").exists()


def test_the_buffers_own_copy_is_uploaded_then_removed(tmp_path):
    buffer_dir = tmp_path / "mlruns" / "buffer"
    src = tmp_path / "run" / "checkpoints" / "iter_000001"
    src.mkdir(parents=True)
    (src / "weights.bin").write_text("w")
    RecordBuffer(buffer_dir).append({"op": "artifacts", "key": "run-key", "local_path": str(src),
                                     "artifact_path": "checkpoints/iter_000001"})
    [record] = RecordBuffer(buffer_dir).pending()
    blob = buffer_dir / "blobs" / record["rid"]
    channel, fake = _channel(buffer_dir)
    assert channel.flush()
    assert fake.uploaded == [blob] and not blob.exists()
    assert (src / "weights.bin").exists()  # the run's own folder is never touched


def test_drop_blob_never_removes_a_foreign_folder(tmp_path):
    home = _victim(tmp_path)
    RecordBuffer(tmp_path / "buffer").drop_blob({"op": "artifacts", "blob": True, "local_path": str(home),
                                                 "rid": "c" * 32})
    assert (home / ".ssh" / "id_rsa").exists()
