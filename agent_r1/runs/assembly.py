"""The building blocks of a run's parts (data folder, index, retriever, policy, samples), each a
function of one ExperimentConfig. `Run` (agent_r1/runs/run.py) is what calls them, once each, in one
order; use a Run rather than these unless you are testing one of them.

They sit above `training/` and `evaluation/`: those are handed the parts (a model, an env factory,
samples) and never import this layer."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig
from agent_r1.retrieval.base import build_index


def ensure_data(cfg: ExperimentConfig) -> Path:
    """The data folder. A generated source (`synthetic`, `arithmetic`, any registered in
    agent_r1/tasks/registry.py) is written on first use, deterministically from the seed, and
    again when its settings change; any other source must have been prepared already."""
    from agent_r1.data.io import replace_dir
    from agent_r1.data.owned import check_replaceable
    from agent_r1.tasks.registry import DATA_GENERATORS, get_data_generator

    d = Path(cfg.data.dir)
    generator = get_data_generator(cfg.data.source)
    if generator is None:
        if (d / cfg.data.train_file).exists():
            return d
        raise FileNotFoundError(f"{d / cfg.data.train_file} not found; run `agent-r1 prepare {cfg.data.source} "
                                f"--input FILE --out {d}` first, or set data.source to a generated task: "
                                f"{', '.join(sorted(DATA_GENERATORS))}")
    with _folder_lock(d):  # two runs starting at once generate the folder once, never interleaved
        if not ((d / cfg.data.train_file).exists() and generator.is_current(cfg.seed, d, cfg.data)):
            fix = _data_dir_fix(cfg)
            # before generating, not after: a folder of the user's own files is refused in a second
            check_replaceable(d, "data.dir", fix, DATA_LEGACY)
            # written aside and renamed into place: a run reading the old files never sees half
            # of the new ones (a process that has one open keeps reading it whole)
            tmp = d.with_name(f".{d.name}.tmp-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            generator.write(cfg.seed, tmp, cfg.data)
            replace_dir(tmp, d, "data.dir", fix, DATA_LEGACY)
    return d


# what generators wrote into a data folder before the marker existed (agent_r1/data/owned.py): the
# synthetic world's summary and a registered task's manifest
DATA_LEGACY = ("world.json", "task.json")


def _data_dir_fix(cfg: ExperimentConfig) -> str:
    return (f"data.source={cfg.data.source} generates its data into data.dir. For your own train.jsonl and "
            f"test.jsonl, set data.source to a name that is not a generator (e.g. data.source=local; see "
            f"docs/extending.md, section 7), or point data.dir at an empty or new folder")


def _folder_lock(folder: Path) -> Any:
    """A lock beside `folder` (`.<name>.lock`), held while it is checked and (re)built."""
    from agent_r1.filelock import FileLock

    return FileLock(folder.parent / f".{folder.name}.lock")


def corpus_digest(cfg: ExperimentConfig, corpus: Path) -> str:
    """The corpus SHA-1 (what an index's retriever.json records), cached by (path, size, mtime) in the
    run's digest cache (agent_r1/runs/lineage.py): every reopening of a run (each Prefect task reopens
    it) and each task's cache key would otherwise read the whole corpus again."""
    from agent_r1.runs.lineage import digest_cache

    cache = digest_cache(cfg)
    sha = cache.file(corpus, "sha1")
    cache.save()
    return sha


def ensure_index(cfg: ExperimentConfig, data_dir: Path) -> Path:
    """Builds the index unless one built from this very corpus (same SHA-1), with the configured
    backend (and encoder and vector index, for the vector backends), is already there (the corpus
    SHA-1 from `corpus_digest`, which does not read an unchanged corpus again)."""
    from agent_r1.retrieval.base import VECTOR_BACKENDS

    index_dir = Path(cfg.search.index_dir)
    manifest = index_dir / "retriever.json"
    corpus = data_dir / "corpus.jsonl"
    wanted = {"corpus_sha1": corpus_digest(cfg, corpus), "backend": cfg.search.backend}
    if cfg.search.backend in VECTOR_BACKENDS:
        wanted.update(encoder=cfg.search.encoder, dense_index=cfg.search.dense_index)
    if cfg.search.backend.startswith("elasticsearch"):
        # an index on another server (or under another name) is not this run's: built where the config says
        wanted.update(url=cfg.search.server_url(), index_name=cfg.search.index_name)
    with _folder_lock(index_dir):
        built = json.loads(manifest.read_text()) if manifest.exists() else {}
        if any(not _same(k, built.get(k), v) for k, v in wanted.items()):
            build_index(corpus, index_dir, config=cfg.search)
    return index_dir


def _same(key: str, built: Any, wanted: Any) -> bool:
    if key == "url":  # one server, however written (a trailing slash, the default port)
        from agent_r1.retrieval.es_backend import same_server

        return isinstance(built, str) and same_server(built, wanted)
    return built == wanted


def open_run_index(cfg: ExperimentConfig, index_dir: str | Path, check: bool = True) -> Any:
    """The run's retriever: its `search` settings (timeout, pool, retries, credentials scope) over what the
    folder's retriever.json records (agent_r1/retrieval/base.py read_manifest)."""
    from agent_r1.retrieval.base import open_index

    return open_index(index_dir, cfg.search, check=check)


def load_samples(path: str | Path, limit: int | None = None,
                 cfg: ExperimentConfig | None = None) -> list[dict[str, Any]]:
    """Question rows as sample dicts. With the run's `cfg`, each row's own `env` is held to the run's
    env/reward limits (tighten only), so a bad row fails here naming its file:line, not mid-run."""
    from agent_r1.envs.samples import load_questions

    loaded = load_questions(path, env=cfg.env, reward=cfg.reward) if cfg is not None else load_questions(path)
    samples = loaded[0] if isinstance(loaded, tuple) else loaded
    rows = [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in samples]
    return rows[:limit] if limit else rows


def corpus_texts(data_dir: Path) -> list[str]:
    texts = []
    for name in ("corpus.jsonl", "train.jsonl"):
        p = data_dir / name
        if p.exists():
            for line in p.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                texts.append(row.get("text") or row.get("question") or "")
                texts.extend(row.get("answers") or [])
    return texts


def build_policy(cfg: ExperimentConfig, data_dir: Path | None, source: str = "") -> tuple[Any, Any]:
    """`source` (a model folder) > model.name_or_path > a fresh local model sized by cfg.model
    (its tokenizer trained on `data_dir`'s texts; a model folder needs no data)."""
    from agent_r1.models.build import build_local_model, load_model
    from agent_r1.models.checks import check_chat_template

    path = source or cfg.model.name_or_path
    if path:
        model, tokenizer = load_model(path, cfg.model.dtype)
        # a folder without a usable template fails now, naming it, not inside the first rollout
        check_chat_template(tokenizer, str(path), cfg.env.format)
        return model, tokenizer
    if data_dir is None:
        raise ValueError("a fresh local model needs the data folder (its tokenizer is trained on the corpus)")
    model, tokenizer = build_local_model(corpus_texts(data_dir), cfg.model, seed=cfg.seed)
    # the dtype a loaded or resumed policy gets too, so a run keeps one precision from start to resume;
    # parameters only, as from_pretrained(dtype=...) loads them: buffers (rotary frequencies) stay
    # float32, else a resumed run (loaded from its checkpoint) would rotate by other angles
    dtype = torch_dtype(cfg.model.dtype)
    for p in model.parameters():
        p.data = p.data.to(dtype)
    return model, tokenizer


def torch_dtype(name: str) -> Any:
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"model.dtype={name!r} is not a torch floating-point dtype; use float32, bfloat16 or float16")
    return dtype


def set_threads(n: int) -> None:
    import torch

    if n > 0:
        torch.set_num_threads(n)
