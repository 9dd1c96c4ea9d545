"""Two runs starting at the same moment (two deployment runs on a fresh checkout) share the data
folder, the index and the MLflow SQLite store: each must come up once and whole for both. Before the
locks, two processes building one tantivy index failed 8 times in 8 (LockBusy, a missing meta.json)
and two opening one fresh SQLite store failed 5 in 5 ("table already exists")."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests import forked


def _data_and_index(root: str, barrier, queue) -> None:
    try:
        from agent_r1.config import load_config
        from agent_r1.runs.run import Run

        cfg = load_config(None, {"data.dir": f"{root}/data", "search.index_dir": f"{root}/index",
                                 "train.runs_dir": f"{root}/runs",  # the digest cache too: never the repository's
                                 "data.n_people": 60, "data.question_types": ["one_hop", "bridge"]})
        barrier.wait()
        with Run(cfg) as run:  # data, then index, then rows and the retriever (closed on leaving)
            data = run.data_dir
            run.index_dir
            rows = run.train_samples
            hits = run.retriever.search(["city"], k=2)[0]
        queue.put(("ok", len(rows), hashlib.sha256((data / "train.jsonl").read_bytes()).hexdigest(), len(hits)))
    except BaseException as err:  # reported to the test, which names it
        queue.put(("error", f"{type(err).__name__}: {err}"))


def _open_store(uri: str, barrier, queue) -> None:
    try:
        from agent_r1.tracking import MlflowAdapter

        adapter = MlflowAdapter(f"{uri}/mlflow.db", None, f"{uri[len('sqlite:///'):]}/buffer")
        barrier.wait()
        adapter.client.get_experiment_by_name("agent-r1")
        queue.put(("ok",))
    except BaseException as err:
        queue.put(("error", f"{type(err).__name__}: {err}"))


def _race(target, arg: str, trials: int = 2) -> list[list[tuple]]:
    ctx = forked.context()  # two fresh processes, forked from a server that has their imports
    outcomes = []
    for trial in range(trials):
        barrier, queue = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=target, args=(f"{arg}/{trial}", barrier, queue)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)
        outcomes.append([queue.get(timeout=10) for _ in procs])
    return outcomes


def test_two_runs_build_the_same_data_and_index_at_once(tmp_path):
    for a, b in _race(_data_and_index, str(tmp_path)):
        assert a[0] == b[0] == "ok", (a, b)
        assert a[1:] == b[1:] and a[1] > 0 and a[3] == 2  # the same questions, and the index answers


def test_two_runs_open_a_fresh_mlflow_store_at_once(tmp_path):
    for trial in range(2):
        (tmp_path / str(trial)).mkdir()
    outcomes = _race(_open_store, f"sqlite:///{tmp_path}")
    assert all(o == ("ok",) for pair in outcomes for o in pair), outcomes
    assert all((tmp_path / str(t) / "mlflow.db").is_file() for t in range(2))


def test_index_build_leaves_no_temp_folders(tmp_path):
    from agent_r1.data.schema import Document
    from agent_r1.retrieval.base import SearchConfig
    from agent_r1.retrieval.tantivy_backend import TantivyRetriever

    retriever = TantivyRetriever(SearchConfig(backend="tantivy", index_dir=str(tmp_path / "index")))
    assert retriever.index([Document(id="1", title="Lala", text="Lala was born in Dero.")]) == 1
    assert retriever.index([Document(id="2", title="Bo", text="Bo was born in Karu.")]) == 1  # replaces it
    assert sorted(p.name for p in Path(tmp_path / "index").iterdir() if p.name.startswith(".")) == []
    assert [h.title for h in retriever.search(["Karu"], k=1)[0]] == ["Bo"]
    retriever.close()
