"""Retrieval at Wikipedia scale: tantivy over up to 1M generated passages.

For each corpus size (default 10k, 100k, 1M generated passages of about 100 words, below):
- index build: the passages streamed from their generator into the project's tantivy backend
  (TantivyRetriever.index, one writer thread, 128 MiB heap), wall time and on-disk size; the
  generation alone is timed in a separate pass, since the build time includes it;
- recall@5 of the gold title for a sample of queries (an entity name hits its titled passage);
- batch search throughput at k=5 from 1 and 4 processes (retriever_load.search_load: each opens the
  index itself, batches of 64 queries for a fixed time), p50/p99 latency of one-query calls and of batches.
Two query forms: `entity` (the name, as the synthetic world's search plans write them) and
`question` ("Where was NAME born?": frequent words, so long posting lists).
At the largest size, where a search's time goes and what each question word costs (`profile`). Then
the Elasticsearch backend's bulk
indexing rate for 10k passages against noida-db, the ES-API-compatible server the tests use (not a
real Elasticsearch).

Writes benchmarks/results/retrieval_scale.json (machine, load average before/after each phase, commit,
config) and docs/img/bench-retrieval-scale.png. Work files go to benchmarks/.work/retrieval_scale/;
indexes are deleted at the end.

    .venv/bin/python -m benchmarks.retrieval_scale                        # 10k, 100k, 1M (~11 min)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agent_r1.data.schema import Document
from agent_r1.data.synthetic_names import FINAL_SYLLABLES, KNOWN_FOR, LANDMARK_KINDS, SYLLABLES
from agent_r1.retrieval.base import SearchConfig, open_index, open_retriever, write_manifest
from benchmarks import common
from benchmarks.common import ROOT, loadavg, result_path, work_dir, write_json
from benchmarks.retriever_load import ms, search_load
from tests.support.noida import start_noida

RESULT = ROOT / "benchmarks" / "results" / "retrieval_scale.json"  # the figures' file (the plot goes with it)
PLOT = ROOT / "docs" / "img" / "bench-retrieval-scale.png"
TARGET_QPS = 2000.0  # the target: >= 2,000 queries/s at 1M passages from one process
ES_LABEL = "ES-API-compatible test server (noida-db), not a real Elasticsearch"
QUERY_FORMS = ("entity", "question")


# --- the passages -----------------------------------------------------------------------------------
# Like the project's synthetic world (agent_r1/data/synthetic.py): each is about one invented entity,
# titled by its name, and mentions other entities by name, places, years and a fixed English vocabulary;
# longer (about 100 words, like a passage of the paper's 21M-passage Wikipedia corpus) and far more
# numerous. Names use the world's syllable inventory (agent_r1/data/synthetic_names.py) with 4 syllables:
# the world's 2-3 give only 76,500 distinct names, 4 give 3.75M. Passage `i` is titled
# `passage_name(i)`, a bijection of `i` (scrambled so that neighbours do not share prefixes), so a
# query's gold title is known without storing the corpus, and a name is one unique token for the
# `en_stem` analyzer (final syllables end in a, o or u, which the English stemmer leaves alone).
# Passages are a stream (`iter_passages`) drawn from one `random.Random(seed)`: the same (seed, count)
# gives the same passages, and nothing is held in memory but the current one.

_FIRST = tuple(s.capitalize() for s in SYLLABLES)
NAME_SPACE = len(SYLLABLES) ** 3 * len(FINAL_SYLLABLES)  # 4-syllable names: 3,750,000
_SCRAMBLE = 1_000_003  # a prime not dividing NAME_SPACE, so i -> i * _SCRAMBLE + offset is a bijection
assert NAME_SPACE % _SCRAMBLE != 0

KINDS = ("person", "person", "person", "city", "landmark")  # people are most of the world
JOBS = ("farmer", "painter", "sailor", "teacher", "merchant", "engineer", "poet", "judge", "weaver", "doctor")
FIELDS = ("law", "music", "astronomy", "medicine", "history", "botany", "architecture", "trade", "poetry")
EVENTS = ("flood", "drought", "fair", "election", "strike", "council", "harvest", "famine", "treaty")
WORDS_TARGET = (90, 110)  # a passage is closed by the sentence that takes it to at least 90 words


@dataclass(frozen=True)
class PassageConfig:
    """How many passages and from which seed; `words_min` is where a passage stops growing."""

    passages: int
    seed: int = 0
    words_min: int = WORDS_TARGET[0]

    def __post_init__(self) -> None:
        if not 1 <= self.passages <= NAME_SPACE:
            raise ValueError(f"passages must be between 1 and {NAME_SPACE:,} (distinct 4-syllable names), "
                             f"got {self.passages}")


def passage_name(i: int, seed: int = 0) -> str:
    """The title of passage `i`: 4 syllables from the world's inventory, unique for i < NAME_SPACE."""
    code = (i * _SCRAMBLE + 2_654_435 + seed * 7_919) % NAME_SPACE  # offset: passage 0 is not Babababa
    code, last = divmod(code, len(FINAL_SYLLABLES))
    code, mid2 = divmod(code, len(SYLLABLES))
    first, mid1 = divmod(code, len(SYLLABLES))
    return _FIRST[first] + SYLLABLES[mid1] + SYLLABLES[mid2] + FINAL_SYLLABLES[last]


def passage_id(i: int) -> str:
    return f"p{i:08d}"


def _sentences(name: str, kind: str, rng: random.Random, other) -> Iterator[str]:
    """Endless sentences about `name` (a `kind`); `other()` names another passage's entity."""
    if kind == "person":
        yield f"{name} was born in {other()} in {rng.randint(1700, 1999)}."
        yield f"{name} worked as a {rng.choice(JOBS)} and studied {rng.choice(FIELDS)} with {other()}."
    elif kind == "city":
        yield f"{name} is a city in {other()}, known for its {rng.choice(KNOWN_FOR)}."
        yield f"The {rng.choice(LANDMARK_KINDS)} of {name} was built in {rng.randint(1200, 1950)}."
    else:
        yield f"{name} is a {rng.choice(LANDMARK_KINDS)} in {other()}, built in {rng.randint(1200, 1950)}."
        yield f"Visitors to {name} come for its {rng.choice(KNOWN_FOR)} and its {rng.choice(KNOWN_FOR)}."
    while True:
        pick = rng.randrange(6)
        if pick == 0:
            yield f"In {rng.randint(1700, 1999)} a {rng.choice(EVENTS)} in {other()} changed the life of {name}."
        elif pick == 1:
            yield f"{name} is often compared with {other()} and {other()}, though the two differ in {rng.choice(FIELDS)}."
        elif pick == 2:
            yield f"Records from {other()} describe {name} as a centre of {rng.choice(KNOWN_FOR)} and {rng.choice(FIELDS)}."
        elif pick == 3:
            yield f"A {rng.choice(JOBS)} named {other()} wrote about {name} after the {rng.choice(EVENTS)} of {rng.randint(1700, 1999)}."
        elif pick == 4:
            yield f"The {rng.choice(LANDMARK_KINDS)} near {name} is known for its {rng.choice(KNOWN_FOR)}."
        else:
            yield f"Later accounts link {name} to {other()} through {rng.choice(FIELDS)} and a shared {rng.choice(EVENTS)}."


def iter_passages(config: PassageConfig) -> Iterator[Document]:
    """Passages 0 .. config.passages - 1 in order, as Documents (id, title, text), one at a time."""
    rng = random.Random(config.seed)
    n, seed = config.passages, config.seed

    i = 0

    def other() -> str:  # another passage's entity (never the passage's own, unless it is alone)
        j = rng.randrange(n)
        return passage_name((j + 1) % n if j == i else j, seed)

    for i in range(n):
        name = passage_name(i, seed)
        words, parts = 0, []
        for sentence in _sentences(name, rng.choice(KINDS), rng, other):
            parts.append(sentence)
            words += sentence.count(" ") + 1
            if words >= config.words_min:
                break
        yield Document(passage_id(i), name, " ".join(parts))


def sample_indices(passages: int, count: int, seed: int) -> list[int]:
    """`count` distinct passage indices (all of them if fewer), from their own random stream."""
    return random.Random(f"queries-{seed}").sample(range(passages), min(count, passages))


# --- where a search's time goes, at one corpus size -------------------------------------------------
# For each query form, per query: analysing the text and building the term queries (Python), tantivy's
# search (scoring the posting lists, Rust), and fetching the k stored hits (decompressing doc-store
# blocks). Then the cost of each distinct question word searched alone, with its document frequency.

def _us(seconds: float, n: int) -> float:
    return round(1e6 * seconds / max(n, 1), 1)


def split_times(retriever: Any, queries: list[str], k: int) -> dict[str, float]:
    """Microseconds per query for build / search / fetch, each phase timed over all queries."""
    searcher = retriever._open()
    t0 = time.perf_counter()
    built = [retriever._query(q) for q in queries]
    t1 = time.perf_counter()
    found = [searcher.search(q, limit=k, count=False).hits if q is not None else [] for q in built]
    t2 = time.perf_counter()
    for hits in found:
        for _score, address in hits:
            searcher.doc(address)["text"]
    t3 = time.perf_counter()
    n = len(queries)
    return {"analyze_and_build_us": _us(t1 - t0, n), "tantivy_search_us": _us(t2 - t1, n),
            "fetch_hits_us": _us(t3 - t2, n), "total_us": _us(t3 - t0, n)}


def word_costs(retriever: Any, words: list[str], k: int, repeats: int = 20) -> dict[str, dict[str, float]]:
    """Document frequency in `text` and search time of each analysed word searched alone (top-k)."""
    searcher = retriever._open()
    out = {}
    for word in words:
        query = retriever._query(word)
        if query is None:
            continue
        t0 = time.perf_counter()
        for _ in range(repeats):
            searcher.search(query, limit=k, count=False)
        term = retriever.tokens(word)[0]
        out[word] = {"doc_freq_text": searcher.doc_freq("text", term),
                     "search_us": _us(time.perf_counter() - t0, repeats)}
    return out


def profile(index_dir: Path, forms: dict[str, tuple[list[str], list[str]]], k: int, n: int = 500) -> dict[str, Any]:
    """`forms`: name -> (queries, gold titles). Uses the first `n` queries of each form."""
    retriever = open_index(index_dir)
    out: dict[str, Any] = {"queries_per_form": n}
    for form, (queries, _gold) in forms.items():
        retriever.search(queries[:n], k)  # warm, so every phase below sees the same cache state
        out[form] = split_times(retriever, queries[:n], k)
    words = sorted({w.strip("?").lower() for w in forms["question"][0][0].split()})
    out["question_words_alone"] = word_costs(retriever, words, k)
    retriever.close()
    return out


# --- the benchmark ----------------------------------------------------------------------------------

@dataclass
class ScaleConfig:
    """What to measure. `seconds` is the length of each throughput run (per process count and form)."""

    passages: list[int] = field(default_factory=lambda: [10_000, 100_000, 1_000_000])
    seed: int = 0
    k: int = 5
    queries: int = 5_000           # sampled passages whose names are the queries
    batch: int = 64                # queries per search() call, as a rollout turn sends them
    processes: list[int] = field(default_factory=lambda: [1, 4])
    seconds: float = 10.0
    latency_queries: int = 2_000   # one-query calls timed for p50/p99
    es_passages: int = 10_000      # 0: skip the Elasticsearch section
    work: Path = field(default_factory=lambda: work_dir("retrieval_scale"))


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def queries_for(passages: int, config: ScaleConfig, form: str) -> tuple[list[str], list[str]]:
    """(queries, gold titles) for the sampled passages, in the given form."""
    names = [passage_name(i, config.seed) for i in sample_indices(passages, config.queries, config.seed)]
    if form == "entity":
        return names, names
    if form == "question":
        return [f"Where was {n} born?" for n in names], names
    raise ValueError(f"unknown query form {form!r}; use one of {QUERY_FORMS}")


def build_index(passages: int, config: ScaleConfig) -> tuple[Path, dict[str, Any]]:
    """Streams the passages into a fresh tantivy index under the work folder; returns (dir, figures)."""
    pconf = PassageConfig(passages, config.seed)
    row: dict[str, Any] = {"passages": passages, "load_before": loadavg()}
    t0, words = time.perf_counter(), 0
    for doc in iter_passages(pconf):  # generation alone, to tell it apart from indexing
        words += doc.text.count(" ") + 1
    row["generation_s"] = round(time.perf_counter() - t0, 2)
    row["words_per_passage_mean"] = round(words / passages, 1)
    index_dir = config.work / f"tantivy-{passages}"
    shutil.rmtree(index_dir, ignore_errors=True)
    rconf = SearchConfig(backend="tantivy", index_dir=str(index_dir))
    t0 = time.perf_counter()
    retriever = open_retriever(rconf)
    n = retriever.index(iter_passages(pconf))
    retriever.close()
    row["build_s"] = round(time.perf_counter() - t0, 2)
    write_manifest(rconf, {"num_docs": n, "corpus": f"benchmarks/retrieval_scale.py passages, seed {config.seed}"})
    row.update(indexed=n, build_includes_generation=True,
               build_minus_generation_s=round(row["build_s"] - row["generation_s"], 2),
               passages_per_s=round(n / row["build_s"], 1), index_bytes=dir_bytes(index_dir / "tantivy"),
               segments=len(list((index_dir / "tantivy").glob("*.store"))), load_after=loadavg())
    row["index_mib"] = round(row["index_bytes"] / 2**20, 1)
    return index_dir, row


def throughput(index_dir: Path, queries: list[str], processes: int, config: ScaleConfig) -> dict[str, Any]:
    """Queries/s of `processes` processes searching one index together for config.seconds."""
    before = loadavg()
    run = search_load(str(index_dir), queries, None, processes, config.batch, config.k, config.seconds)
    return {"processes": processes, "queries": run["queries"], "seconds": round(run["wall"], 3), "batch": config.batch,
            "qps": round(run["queries"] / run["wall"], 1),
            "qps_per_process": [round(p["queries"] / p["wall"], 1) for p in run["parts"]],
            "batch_latency_ms": ms(run["latencies"], 3, 0.5, 0.99), "errors": run["errors"], "lost": run["lost"],
            "load_before": before, "load_after": loadavg()}


def single_query_latency(index_dir: Path, queries: list[str], gold: list[str], config: ScaleConfig) -> dict[str, Any]:
    """Recall@k of the gold titles over all queries, and p50/p99 of one-query search() calls."""
    retriever = open_index(index_dir)
    before = loadavg()
    results = retriever.search(queries, config.k)
    recall = sum(g in [h.title for h in hits] for g, hits in zip(gold, results)) / len(gold)
    top1 = sum(bool(hits) and hits[0].title == g for g, hits in zip(gold, results)) / len(gold)
    times = []
    for q in queries[:config.latency_queries]:
        t0 = time.perf_counter()
        retriever.search([q], config.k)
        times.append(time.perf_counter() - t0)
    retriever.close()
    return {f"recall@{config.k}": round(recall, 4), "top1": round(top1, 4), "n_queries": len(queries),
            "latency_ms": {**ms(times, 3, 0.5, 0.99), "calls": len(times)},
            "load_before": before, "load_after": loadavg()}


def es_bulk(config: ScaleConfig) -> dict[str, Any]:
    """Bulk indexing rate of the Elasticsearch backend (chunks of bulk_chunk_size, then a refresh)."""
    docs = list(iter_passages(PassageConfig(config.es_passages, config.seed)))  # generated before the clock
    data_dir = config.work / "noida"
    shutil.rmtree(data_dir, ignore_errors=True)
    server = start_noida(data_dir, timeout_s=60)
    try:
        rconf = SearchConfig(backend="elasticsearch", index_dir="", url=server.url, index_name="bench-scale",
                             timeout_s=600)
        retriever = open_retriever(rconf)
        before = loadavg()
        t0 = time.perf_counter()
        n = retriever.index(docs)
        seconds = time.perf_counter() - t0
        after = loadavg()
        counted = retriever.count()
        retriever.close()
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"server": ES_LABEL, "noida_db": version("noida-db"), "elasticsearch_client": version("elasticsearch"),
            "passages": n, "count_after_refresh": counted, "bulk_chunk_size": rconf.bulk_chunk_size,
            "index_s": round(seconds, 2), "docs_per_s": round(n / seconds, 1),
            "includes": "create index, bulk requests, refresh (passages generated beforehand)",
            "load_before": before, "load_after": after}


def run(config: ScaleConfig, out: Path | None = RESULT, plot: Path | None = PLOT,
        command: str = "python -m benchmarks.retrieval_scale") -> dict[str, Any]:
    """Every phase for every size; writes the JSON (and the plot) when paths are given."""
    config.work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "command": command,
        "machine": common.machine(tantivy=version("tantivy"), note="2 cores shared with other benchmark jobs: see "
                                  "load_before/load_after of each phase"),
        "config": {**asdict(config), "work": str(config.work)},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "target_qps_1_process_1M": TARGET_QPS,
        "builds": [], **{f"search_{form}_queries": [] for form in QUERY_FORMS}, "quality": []}
    for passages in sorted(config.passages):
        index_dir, row = build_index(passages, config)
        report["builds"].append(row)
        print("build", json.dumps(row), flush=True)
        for form in QUERY_FORMS:
            queries, gold = queries_for(passages, config, form)
            quality = {"passages": passages, "form": form, **single_query_latency(index_dir, queries, gold, config)}
            report["quality"].append(quality)
            print("quality", json.dumps(quality), flush=True)
            for processes in config.processes:
                res = {"passages": passages, "form": form, **throughput(index_dir, queries, processes, config)}
                report[f"search_{form}_queries"].append(res)
                print("search", json.dumps(res), flush=True)
        if passages == max(config.passages):
            before = loadavg()
            forms = {form: queries_for(passages, config, form) for form in QUERY_FORMS}
            report["profile_at_largest"] = {"passages": passages, **profile(index_dir, forms, config.k),
                                            "load_before": before, "load_after": loadavg()}
            print("profile", json.dumps(report["profile_at_largest"]), flush=True)
        shutil.rmtree(index_dir, ignore_errors=True)
    report["target_met"] = target_check(report)
    if config.es_passages:
        report["elasticsearch_bulk"] = es_bulk(config)
        print("elasticsearch", json.dumps(report["elasticsearch_bulk"]), flush=True)
    report["machine"]["load_average_at_end"] = loadavg()
    if out is not None:
        write_json(out, report)
    if plot is not None and out is not None:
        from benchmarks.plots import plot_retrieval_scale

        plot.parent.mkdir(parents=True, exist_ok=True)
        print(f"wrote {plot_retrieval_scale(out.parent, plot.parent)}")
    return report


def target_check(report: dict[str, Any]) -> dict[str, Any]:
    """Whether 1 process reaches TARGET_QPS at the largest size measured, per query form."""
    largest = max(b["passages"] for b in report["builds"])
    out: dict[str, Any] = {"passages": largest, "at_1M": largest >= 1_000_000}
    for form in QUERY_FORMS:
        one = [r["qps"] for r in report[f"search_{form}_queries"] if r["passages"] == largest and r["processes"] == 1]
        out[form] = {"qps": one[0], "met": one[0] >= TARGET_QPS} if one else None
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)  # --help, and no options
    out = result_path("retrieval_scale")  # $AGENT_R1_BENCH_RESULTS moves it, and then no plot is drawn
    run(ScaleConfig(), out, PLOT if out == RESULT else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
