"""The Run (agent_r1/runs/run.py): the run's recipe, one owner of run assembly. It settles the run once
(folder, config.json, a frozen config), builds each part once and in one order (`setup`), reopens
from its folder, and travels to other processes as a picklable spec."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from agent_r1.config import ExperimentConfig, load_config
from agent_r1.runs.run import Run, RunSpec
from agent_r1.schema import FrozenConfigError, freeze, is_frozen
from tests.pipeline_helpers import unpinned_micro


def _cfg(tmp_path: Path, **extra) -> ExperimentConfig:
    # a fresh model (no warm start): the run's own assembly only
    return load_config(None, unpinned_micro(tmp_path, **{"train.init_from": "", "train.eval_every": 0,
                                                         "train.iterations": 1, **extra}))


def test_open_settles_the_run_and_freezes_its_config(tmp_path):
    cfg = _cfg(tmp_path)
    run = Run.open(cfg, log=lambda _: None)
    assert run.folder.parent == tmp_path / "runs" / cfg.train.experiment and run.folder.is_dir()
    as_json = json.loads(json.dumps(run.cfg.to_dict(), default=str))
    assert json.loads((run.folder / "config.json").read_text()) == as_json
    assert run.cfg.train.out_dir == str(run.folder)
    assert cfg.train.out_dir == "" and not is_frozen(cfg)  # the caller's config is the caller's
    with pytest.raises(FrozenConfigError, match=r"TrainConfig\.lr"):
        run.cfg.train.lr = 1.0
    with pytest.raises(FrozenConfigError, match=r"ExperimentConfig\.seed"):
        run.cfg.seed = 3
    reopened = Run.load(run.folder)
    assert reopened.cfg == run.cfg


def test_a_folder_without_config_is_no_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        Run.load(tmp_path)


def test_each_part_is_built_once(tmp_path, monkeypatch):
    from agent_r1.runs import assembly

    calls = {"data": 0, "index": 0}
    real_data, real_index = assembly.ensure_data, assembly.ensure_index

    def data(cfg):
        calls["data"] += 1
        return real_data(cfg)

    def index(cfg, data_dir):
        calls["index"] += 1
        return real_index(cfg, data_dir)

    monkeypatch.setattr(assembly, "ensure_data", data)
    monkeypatch.setattr(assembly, "ensure_index", index)
    run = Run.open(_cfg(tmp_path), log=lambda _: None)
    result = run.train()
    # data and index checked once for the whole run: lineage, policy, samples and env share them
    assert calls == {"data": 1, "index": 1}
    assert result["iterations"] == 1 and Path(result["checkpoint"]).is_dir()
    assert run.env_factory is run.env_factory and run.train_samples is run.train_samples


def test_setup_builds_the_parts_in_one_order(tmp_path, monkeypatch):
    from agent_r1.envs import factory
    from agent_r1.runs import assembly
    from agent_r1.runs import run as recipe
    from agent_r1.training import trainer

    run = Run.open(_cfg(tmp_path), log=lambda _: None)
    order = []

    def spy(module, name, label):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, **k: order.append(label) or real(*a, **k))

    for module, name, label in ((recipe, "hold_run_folder", "folder"), (assembly, "ensure_data", "data"),
                                (assembly, "ensure_index", "index"), (recipe, "start_card", "card"),
                                (recipe, "metrics_logger", "logger"), (factory, "make_env_factory", "env"),
                                (assembly, "build_policy", "policy"), (trainer, "RLTrainer", "trainer")):
        spy(module, name, label)
    run.setup()
    run.close()
    assert order == ["folder", "data", "index", "card", "logger", "env", "policy", "trainer"]


def test_the_spec_rebuilds_the_same_run_elsewhere(tmp_path):
    run = Run.open(_cfg(tmp_path), log=lambda _: None)
    spec = run.spec()
    spec.attach().data_dir  # a process's parts stay in that process
    again = pickle.loads(pickle.dumps(spec))
    assert isinstance(again, RunSpec) and again.config == run.cfg.to_dict() and again.resume is False
    assert again._run == [] and is_frozen(again.cfg) and again.cfg == run.cfg


def test_with_start_rewrites_config_json_and_returns_a_new_run(tmp_path):
    run = Run.open(_cfg(tmp_path), resolve_start=False, log=lambda _: None)
    started = run.with_start(tmp_path / "warm" / "model", tmp_path / "warm")
    saved = json.loads((run.folder / "config.json").read_text())
    assert saved["train"]["init_from"] == str(tmp_path / "warm" / "model") == started.cfg.train.init_from
    assert saved["sft"]["out_dir"] == str(tmp_path / "warm")
    assert run.cfg.train.init_from == ""  # the first Run keeps the config it was opened with


def test_copies_of_a_frozen_config_are_writable_and_plain():
    cfg = freeze(load_config(None, {}))
    changed = dataclasses.replace(cfg.train, lr=0.5)
    changed.lr = 0.25  # a replaced section is a new config, not the run's
    thawed = copy.deepcopy(cfg)
    thawed.train.lr = 0.125
    shipped = pickle.loads(pickle.dumps(cfg))
    assert type(shipped) is ExperimentConfig and type(shipped.train) is type(load_config(None, {}).train)
    assert shipped == cfg and cfg.train.lr != 0.125 and not is_frozen(thawed)


def test_the_run_stops_its_engine_when_training_ends(tmp_path, monkeypatch):
    # vLLM's engine core is a process of its own: the in-process trainer never stopped it before
    from agent_r1.rollout.engine import TransformersEngine

    closed = []
    monkeypatch.setattr(TransformersEngine, "close", lambda self: closed.append(self), raising=False)
    Run.open(_cfg(tmp_path), log=lambda _: None).train()
    assert len(closed) == 1


def test_a_reopened_run_reads_an_unchanged_corpus_once(tmp_path, monkeypatch):
    """The corpus SHA-1 an index records is cached by (path, size, mtime) under train.runs_dir/.cache,
    as the lineage digests are: every Prefect task reopens the run, and a Wikipedia-sized corpus took
    minutes to hash each time. A changed corpus (content and mtime, same size) is hashed and indexed again."""
    import builtins
    import hashlib
    import os

    from agent_r1.runs import assembly

    cfg = _cfg(tmp_path)
    corpus = Run(cfg).index_dir and Path(cfg.data.dir) / "corpus.jsonl"  # built: data, index, cache
    reads, builds = [], []
    real_open, real_path_open, real_build = builtins.open, Path.open, assembly.build_index

    def spy_open(file, *a, **k):
        if Path(str(file)).resolve() == corpus.resolve():
            reads.append(file)
        return real_open(file, *a, **k)

    def spy_path_open(self, *a, **k):
        if self.resolve() == corpus.resolve():
            reads.append(self)
        return real_path_open(self, *a, **k)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(Path, "open", spy_path_open)
    monkeypatch.setattr(assembly, "build_index", lambda *a, **k: builds.append(a) or real_build(*a, **k))
    assert Run(cfg).index_dir == Path(cfg.search.index_dir)  # a reopened run: its own new cache object
    assert reads == [] and builds == []
    assert (tmp_path / "runs" / ".cache" / "digests.json").is_file()  # the tmp runs_dir's, not the repository's

    text = corpus.read_bytes()
    i = text.index(b'"text": "') + len(b'"text": "')
    changed = text[:i] + (b"Q" if text[i:i + 1] != b"Q" else b"R") + text[i + 1:]  # same size
    corpus.write_bytes(changed)
    st = corpus.stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    reads.clear()
    Run(cfg).index_dir
    assert reads and len(builds) == 1
    manifest = json.loads((Path(cfg.search.index_dir) / "retriever.json").read_text())
    assert manifest["corpus_sha1"] == hashlib.sha1(changed).hexdigest()
