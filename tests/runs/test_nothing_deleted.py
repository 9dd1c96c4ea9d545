"""agent-r1 never deletes or overwrites a folder it did not create.

A folder the project makes carries a marker file (`.agent-r1-made`); one without it that is not
empty is refused with its path and the fix, never replaced. Dangerous targets (/, the home folder,
a folder holding the repository or the working directory) are refused outright.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_r1.config import load_config
from agent_r1.data.io import replace_dir
from agent_r1.data.owned import MARKER, ForeignFolderError
from agent_r1.training import checkpoint as ckpt
from tests.pipeline_helpers import unpinned_micro


def _cfg(tmp_path: Path, **extra):
    return load_config(None, unpinned_micro(tmp_path, **extra))


def _users_folder(path: Path, **files: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name.replace("__", ".")).write_text(text)
    return path


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- data.dir ------------------------------------------------------------------------------------

def test_a_data_dir_of_the_users_own_files_is_refused_not_replaced(tmp_path):
    """docs/extending.md's setup with the default data.source: the user's files stay, the error says
    which setting to change."""
    data = _users_folder(tmp_path / "mydata", train__jsonl='{"id": "1"}\n', notes__txt="hand-written")
    before = _snapshot(data)
    from agent_r1.runs.assembly import ensure_data

    with pytest.raises(ForeignFolderError) as err:
        ensure_data(_cfg(tmp_path, **{"data.dir": str(data)}))
    assert _snapshot(data) == before
    message = str(err.value)
    assert str(data) in message and "notes.txt" in message and "data.source" in message


def test_a_world_an_older_version_wrote_is_still_regenerated(tmp_path):
    """Folders made before the marker existed carry the generator's own manifest (world.json): they
    are recognised as the project's, so a settings change still regenerates them."""
    from agent_r1.data.synthetic import SyntheticConfig, write_synthetic
    from agent_r1.runs.assembly import ensure_data

    data = tmp_path / "data" / "synthetic"
    write_synthetic(0, data, SyntheticConfig(seed=0, n_people=40))
    assert not (data / MARKER).exists()
    ensure_data(_cfg(tmp_path))  # n_people=60: a different world
    assert json.loads((data / "world.json").read_text())["config"]["n_people"] == 60
    assert (data / MARKER).is_file()


# --- the shared helper every folder replacement goes through ----------------------------------------

def test_replace_dir_refuses_a_folder_it_did_not_make(tmp_path):
    dest = _users_folder(tmp_path / "index", notes__txt="mine")
    built = tmp_path / ".index.tmp"
    built.mkdir()
    (built / "meta.json").write_text("{}")
    with pytest.raises(ForeignFolderError, match="notes.txt"):
        replace_dir(built, dest)
    assert _snapshot(dest) == {"notes.txt": "mine"}


def test_replace_dir_marks_what_it_puts_in_place_and_replaces_it_again(tmp_path):
    dest = tmp_path / "out"
    for n in (1, 2):
        built = tmp_path / f".out.tmp{n}"
        built.mkdir()
        (built / "f.txt").write_text(str(n))
        replace_dir(built, dest)
    assert (dest / "f.txt").read_text() == "2" and (dest / MARKER).is_file()


# --- sft.out_dir ---------------------------------------------------------------------------------

def test_an_sft_out_dir_with_the_users_files_is_refused_before_training(tmp_path):
    from agent_r1.runs.warm_start import ensure_warm_start

    mine = _users_folder(tmp_path / "models", download__bin="45 MB", notes__txt="notes")
    logged: list[str] = []
    with pytest.raises(ForeignFolderError) as err:
        ensure_warm_start(_cfg(tmp_path, **{"sft.out_dir": str(mine)}), log=logged.append)
    assert _snapshot(mine) == {"download.bin": "45 MB", "notes.txt": "notes"}
    assert "sft.out_dir" in str(err.value) and not any("training" in line for line in logged)


# --- train.out_dir -------------------------------------------------------------------------------

def test_a_pinned_train_out_dir_holding_a_model_is_refused(tmp_path):
    from agent_r1.runs.folders import open_run

    model = _users_folder(tmp_path / "my-model", config__json='{"model_type": "llama"}')
    with pytest.raises(ForeignFolderError, match="train.out_dir"):
        open_run(_cfg(tmp_path, **{"train.out_dir": str(model)}))
    assert _snapshot(model) == {"config.json": '{"model_type": "llama"}'}


def test_train_refuses_a_pinned_model_folder_before_any_sft(tmp_path):
    from agent_r1.runs.run import run_train

    model = _users_folder(tmp_path / "my-model", config__json="{}")
    with pytest.raises(ForeignFolderError, match="train.out_dir"):
        run_train(_cfg(tmp_path, **{"train.out_dir": str(model)}))
    assert not (tmp_path / "runs" / "warm_starts").exists()  # refused first, not after minutes of SFT


def test_a_pinned_run_folder_from_an_older_version_is_still_accepted(tmp_path):
    """A run folder made before markers existed has its card (run.json) or its history."""
    from agent_r1.runs.folders import open_run

    old = _users_folder(tmp_path / "runs" / "default", metrics__jsonl='{"step": 1}\n')
    assert open_run(_cfg(tmp_path, **{"train.out_dir": str(old)})) == old
    assert (old / MARKER).is_file()


# --- dangerous targets ---------------------------------------------------------------------------

@pytest.fixture
def fake_home(tmp_path, monkeypatch):
    home = _users_folder(tmp_path / "home" / "someone", __bashrc="export X=1")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize("key", ["train.out_dir", "sft.out_dir"])
@pytest.mark.parametrize("where", ["home", "above home", "root", "repository"])
def test_obviously_dangerous_folders_are_refused(tmp_path, fake_home, key, where):
    from agent_r1.data.owned import check_not_dangerous

    target = {"home": fake_home, "above home": fake_home.parent, "root": Path("/"),
              "repository": Path(__file__).resolve().parents[2]}[where]
    with pytest.raises(ForeignFolderError, match=key):
        check_not_dangerous(target, key)


def test_a_pinned_train_out_dir_at_home_is_refused(tmp_path, fake_home):
    from agent_r1.runs.folders import open_run

    with pytest.raises(ForeignFolderError, match="home"):
        open_run(_cfg(tmp_path, **{"train.out_dir": str(fake_home)}))
    assert sorted(p.name for p in fake_home.iterdir()) == [".bashrc"]


def test_an_sft_out_dir_above_home_is_refused(tmp_path, fake_home):
    from agent_r1.runs.warm_start import ensure_warm_start

    with pytest.raises(ForeignFolderError, match="sft.out_dir"):
        ensure_warm_start(_cfg(tmp_path, **{"sft.out_dir": str(fake_home.parent)}), log=lambda _: None)
    assert (fake_home / ".bashrc").is_file()


# --- keep_checkpoints after a fallback -------------------------------------------------------------

class _Saveable:
    def save_pretrained(self, path):
        (path / "weights.txt").write_text("w")


def test_keep_one_after_a_fallback_keeps_the_checkpoint_just_saved(tmp_path):
    """iter_20 is corrupt, the run falls back to iter_10 and saves iter_11: pruning by name alone kept
    the corrupt iter_20 and deleted iter_11, so `latest` named a folder that was gone."""
    root = tmp_path / "checkpoints"
    for it in (10, 20):
        ckpt.save_checkpoint(root, it, _Saveable(), _Saveable(), {"x": it}, keep=2)
    (root / "iter_000020" / ckpt.STATE_FILE).write_bytes(b"PK\x03\x04 cut short")
    assert ckpt.latest_checkpoint(root).name == "iter_000010"  # the fallback
    ckpt.save_checkpoint(root, 11, _Saveable(), _Saveable(), {"x": 11}, keep=1)
    assert (root / "iter_000011").is_dir()
    assert ckpt.latest_checkpoint(root) == root / "iter_000011"
    assert ckpt.load_state(root / "iter_000011")["x"] == 11


def test_keep_two_after_a_fallback_keeps_the_good_one_before_it(tmp_path):
    root = tmp_path / "checkpoints"
    for it in (10, 20):
        ckpt.save_checkpoint(root, it, _Saveable(), _Saveable(), {"x": it}, keep=2)
    (root / "iter_000020" / ckpt.STATE_FILE).write_bytes(b"PK\x03\x04 cut short")
    ckpt.save_checkpoint(root, 11, _Saveable(), _Saveable(), {"x": 11}, keep=2)
    assert {"iter_000010", "iter_000011"} <= {p.name for p in root.glob("iter_*")}


# --- model folders written by commands (same class: --out at someone's folder) ------------------------

def test_export_refuses_to_write_over_a_model_folder_it_did_not_make(tiny_model, tmp_path):
    from agent_r1.models.build import save_model
    from agent_r1.models.export import export_model

    save_model(*tiny_model, tmp_path / "checkpoints" / "iter_000001")
    base = _users_folder(tmp_path / "base-model", config__json='{"model_type": "qwen2"}', README__md="mine")
    with pytest.raises(ForeignFolderError, match="--out"):
        export_model(tmp_path / "checkpoints" / "iter_000001", base)
    assert _snapshot(base) == {"README.md": "mine", "config.json": '{"model_type": "qwen2"}'}
    out = export_model(tmp_path / "checkpoints" / "iter_000001", tmp_path / "exported")
    assert export_model(tmp_path / "checkpoints" / "iter_000001", out) == out  # its own export: again is fine


def test_build_model_refuses_to_write_over_a_folder_it_did_not_make(tmp_path):
    from agent_r1.models.qwen_like import build_like

    mine = _users_folder(tmp_path / "qwen", config__json='{"model_type": "qwen2"}')
    with pytest.raises(ForeignFolderError, match="--out"):
        build_like("qwen2.5", mine)
    assert _snapshot(mine) == {"config.json": '{"model_type": "qwen2"}'}


def test_prepare_synthetic_refuses_a_folder_of_the_users_own_data(tmp_path, capsys):
    from agent_r1.cli import main

    mine = _users_folder(tmp_path / "mydata", train__jsonl='{"id": "mine"}\n')
    assert main(["prepare", "synthetic", "--seed", "0", "--out", str(mine)]) == 2
    assert f"--out={mine} holds files agent-r1 did not write (train.jsonl)" in capsys.readouterr().err
    assert _snapshot(mine) == {"train.jsonl": '{"id": "mine"}\n'}
