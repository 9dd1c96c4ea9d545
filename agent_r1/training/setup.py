"""Builds the run's parts from one ExperimentConfig: data, index, policy, engine, env factory."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_r1.config import ExperimentConfig


def ensure_data(cfg: ExperimentConfig) -> Path:
    """The data folder; the synthetic world is generated on first use (deterministic from seed)."""
    d = Path(cfg.data.dir)
    if (d / cfg.data.train_file).exists() and (cfg.data.source != "synthetic" or _same_world(cfg, d)):
        return d
    if cfg.data.source != "synthetic":
        raise FileNotFoundError(f"{d / cfg.data.train_file} not found; run `agent-r1 prepare {cfg.data.source} "
                                f"--input FILE --out {d}` first")
    from agent_r1.data.synthetic import SyntheticConfig, write_synthetic

    write_synthetic(cfg.seed, d, SyntheticConfig(seed=cfg.seed, n_people=cfg.data.n_people,
                                                 question_types=tuple(cfg.data.question_types)))
    return d


def _same_world(cfg: ExperimentConfig, d: Path) -> bool:
    """A synthetic folder is reused only if it was generated with the configured knobs."""
    meta = d / "world.json"
    if not meta.exists():
        return False
    made = json.loads(meta.read_text()).get("config", {})
    return (made.get("seed") == cfg.seed and made.get("n_people") == cfg.data.n_people
            and list(made.get("question_types", [])) == list(cfg.data.question_types))


def build_index(corpus: str | Path, index_dir: str | Path, backend: str = "tantivy", **options: Any) -> int:
    """Indexes a corpus JSONL into `index_dir` and writes its manifest; returns the doc count."""
    from agent_r1.data.corpus import load_corpus_jsonl
    from agent_r1.retrieval.base import RetrievalConfig, open_retriever, write_manifest

    docs = load_corpus_jsonl(corpus)
    config = RetrievalConfig(backend=backend, index_dir=Path(index_dir), **options)
    retriever = open_retriever(config)
    try:
        n = retriever.index(docs)
    finally:
        retriever.close()
    write_manifest(config, {"num_docs": n, "corpus": str(corpus), "corpus_sha1": _sha1(corpus)})
    return n


def _sha1(path: str | Path) -> str:
    import hashlib

    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


def ensure_index(cfg: ExperimentConfig, data_dir: Path) -> Path:
    """Builds the index unless one built from this very corpus (same SHA-1) is already there."""
    index_dir = Path(cfg.search.index_dir)
    manifest = index_dir / "retriever.json"
    corpus = data_dir / "corpus.jsonl"
    built_from = json.loads(manifest.read_text()).get("corpus_sha1") if manifest.exists() else None
    if built_from != _sha1(corpus):
        options = {"url": cfg.search.url, "index_name": cfg.search.index_name} if cfg.search.url else {}
        build_index(data_dir / "corpus.jsonl", index_dir, cfg.search.backend, **options)
    return index_dir


def load_samples(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    from agent_r1.data.loaders import load_questions_jsonl

    loaded = load_questions_jsonl(path)
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


def build_policy(cfg: ExperimentConfig, data_dir: Path, source: str = "") -> tuple[Any, Any]:
    """`source` (a model folder) > model.name_or_path > a fresh local model sized by cfg.model."""
    from agent_r1.models.build import build_local_model, load_model

    path = source or cfg.model.name_or_path
    if path:
        return load_model(path, cfg.model.dtype)
    return build_local_model(corpus_texts(data_dir), cfg.model, seed=cfg.seed)


def make_env_factory(cfg: ExperimentConfig, retriever: Any) -> Callable[[dict[str, Any]], Any]:
    from agent_r1.envs.formats import get_format
    from agent_r1.envs.tool_env import ToolEnv
    from agent_r1.tools.registry import create_tool
    from agent_r1.tools.runner import ToolRunner
    import agent_r1.tools.search  # noqa: F401  registers "search"

    tool = create_tool("search", retriever=retriever, k=cfg.search.k, max_chars_per_doc=cfg.search.max_chars_per_doc)
    runner = ToolRunner([tool], timeout_s=cfg.search.timeout_s)
    fmt = get_format(cfg.env.format)

    def make_env(sample: dict[str, Any]) -> ToolEnv:
        return ToolEnv(runner, fmt, cfg.env, cfg.reward)

    return make_env


def set_threads(n: int) -> None:
    import torch

    if n > 0:
        torch.set_num_threads(n)
