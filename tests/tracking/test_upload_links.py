"""Nothing outside a run's own folders is uploaded: a symlink in a checkpoint folder (to
a file or a folder) is never followed, whether the checkpoint goes to MLflow at once or through the
offline buffer's copy; and a resumed run does not upload again the checkpoints its earlier run did."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_r1.tracking import RecordBuffer, RunTracker, main
from tests.mlflow_store import fresh_store

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-for-mlflow"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return fresh_store(tmp_path_factory.mktemp("store"))


def _checkpoint_with_links(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    folder = tmp_path / "run" / "checkpoints" / "iter_000001"
    (folder / "sub").mkdir(parents=True)
    (folder / "state.pt").write_text("state")
    (folder / "sub" / "weights.bin").write_text("weights")
    os.symlink(home / ".ssh" / "id_rsa", folder / "id_rsa")  # a file link
    os.symlink(home / ".ssh", folder / "keys")  # a folder link
    os.symlink(home / ".ssh", folder / "sub" / "deeper")
    return folder


def _uploaded(uri: str, run_id: str, root: Path) -> set[str]:
    from mlflow.tracking import MlflowClient

    client, found, todo = MlflowClient(tracking_uri=uri), set(), [None]
    while todo:
        for item in client.list_artifacts(run_id, todo.pop()):
            (todo.append(item.path) if item.is_dir else found.add(item.path))
    stored = [p for p in root.rglob("*") if p.is_file()]
    assert not any(SECRET in p.read_text(errors="replace") for p in stored), "the key reached the artifact store"
    return found


def test_links_in_a_checkpoint_are_not_followed_when_sent_at_once(store, tmp_path):
    folder = _checkpoint_with_links(tmp_path)
    tracker = RunTracker("links-direct", experiment="links", tracking_uri=store, buffer_dir=tmp_path / "buffer",
                         verbose=False)
    tracker.log_artifacts(folder, "checkpoints/iter_000001")
    rep = tracker.close()
    assert rep["pending"] == 0 and rep["rejected"] == 0, rep
    files = _uploaded(store, tracker.run_id, Path(store[len("sqlite:///"):]).parent)
    assert files == {"checkpoints/iter_000001/state.pt", "checkpoints/iter_000001/sub/weights.bin"}, files


def test_links_in_a_checkpoint_are_not_copied_into_the_buffer_nor_uploaded_from_it(store, tmp_path):
    folder = _checkpoint_with_links(tmp_path)
    buffer = tmp_path / "buffer"
    b = RecordBuffer(buffer)
    b.append({"op": "create_run", "key": "lk", "name": "links-buffered", "experiment": "links", "tags": {},
              "parent_key": None, "time_ms": 1})
    b.append({"op": "artifacts", "key": "lk", "local_path": str(folder), "artifact_path": "ckpt"})
    copied = [p for p in (buffer / "blobs").rglob("*")]
    assert not any(p.is_symlink() for p in copied)
    assert not any(SECRET in p.read_text(errors="replace") for p in copied if p.is_file()), "the key was copied"
    assert main(["flush", "--buffer", str(buffer), "--tracking-uri", store]) == 0
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=store).search_runs(
        [MlflowClient(tracking_uri=store).get_experiment_by_name("links").experiment_id],
        "attributes.run_name = 'links-buffered'")[0]
    files = _uploaded(store, run.info.run_id, Path(store[len("sqlite:///"):]).parent)
    assert files == {"ckpt/state.pt", "ckpt/sub/weights.bin"}, files


class _Saves:
    def save_pretrained(self, folder) -> None:
        Path(folder, "config.json").write_text("{}")


class _Recorder:
    def __init__(self) -> None:
        self.uploaded: list[str] = []

    def log_artifacts(self, path, artifact_path=None, files=None) -> None:
        self.uploaded.append(Path(path).name)


def test_a_resumed_run_uploads_only_the_checkpoint_it_resumes_from_and_later_ones(tmp_path):
    from agent_r1.runs.run import metrics_logger
    from agent_r1.training.checkpoint import latest_checkpoint, save_checkpoint

    out = tmp_path / "run"
    for it in (1, 2, 3):
        save_checkpoint(out / "checkpoints", it, _Saves(), _Saves(), {}, keep=0)
    recorder = _Recorder()
    sink = metrics_logger(out, recorder, resume_from=latest_checkpoint(out / "checkpoints"))
    sink.log_checkpoints()
    assert recorder.uploaded == ["iter_000003"], recorder.uploaded
    save_checkpoint(out / "checkpoints", 4, _Saves(), _Saves(), {}, keep=0)
    sink.log_checkpoints()
    assert recorder.uploaded == ["iter_000003", "iter_000004"]


def test_a_checkpoint_uploads_only_the_files_its_manifest_lists(store, tmp_path):
    """A file dropped into a checkpoint folder after it was written (not in its manifest) stays local."""
    from mlflow.tracking import MlflowClient

    from agent_r1.tracking import MlflowSink
    from agent_r1.training.checkpoint import save_checkpoint

    root = tmp_path / "run" / "checkpoints"
    folder = save_checkpoint(root, 1, _Saves(), _Saves(), {}, keep=0)
    (folder / "notes.txt").write_text(SECRET)
    listed = set(json.loads((folder / "manifest.json").read_text())["sizes"])
    for buffered in (False, True):
        tracker = RunTracker(f"manifest-{buffered}", experiment="links", tracking_uri=store,
                             buffer_dir=tmp_path / f"buffer-{buffered}", verbose=False)
        if buffered:  # MLflow away when the checkpoint is logged: the buffer's copy is what goes later
            tracker.mlflow.offline, tracker.mlflow.retry_at = True, float("inf")
        sink = MlflowSink(tracker, checkpoints_dir=root)
        assert sink.log_checkpoints() == ["iter_000001"]
        tracker.mlflow.retry_at = 0.0
        rep = tracker.close()
        assert rep["pending"] == 0 and rep["rejected"] == 0, rep
        files = _uploaded(store, tracker.run_id, Path(store[len("sqlite:///"):]).parent)
        assert files == {f"checkpoints/iter_000001/{name}" for name in listed | {"manifest.json"}}, files
        assert not list((tmp_path / f"buffer-{buffered}").glob("blobs/*/notes.txt"))
