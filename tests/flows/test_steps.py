"""The flow's tasks work on the Run the flow opened (agent_r1/runs/run.py), handed to them; a task run
on its own is handed the run folder instead, and its cache keys are the same either way."""

from __future__ import annotations

from agent_r1.config import load_config
from agent_r1.runs.run import Run
from flows.steps import data_key, run_of
from tests.pipeline_helpers import unpinned_micro


def test_a_task_works_on_the_run_it_is_handed_or_the_one_its_folder_holds(tmp_path, monkeypatch):
    run = Run.open(load_config(None, unpinned_micro(tmp_path, **{"train.init_from": ""})), log=lambda _: None)
    loads = []
    real_load = Run.load.__func__
    monkeypatch.setattr(Run, "load", classmethod(lambda cls, *a, **k: loads.append(a) or real_load(cls, *a, **k)))
    assert run_of(run) is run and loads == []  # the flow's own Run: not reopened from config.json
    assert run_of(str(run.folder)).cfg == run.cfg and len(loads) == 1
    assert data_key(None, {"run": run, "dvc": False}) == data_key(None, {"run": str(run.folder), "dvc": False})
