"""Every figure README.md and docs/*.md quote, rendered from the result files (benchmarks/results/).

A page holds each figure between markers, `<!-- fig:ID -->82.7 [72.7, 93.7]<!-- /fig -->`, inline in its
prose or in a table's cells; the page keeps the wording, this script writes the number. ID is the
figure's name below, lowercased with every run of other characters a dash.

    python -m benchmarks.tables            rewrite the figures in README.md and docs/*.md
    python -m benchmarks.tables --check    exit 1, naming each figure whose page text is stale

A rerun benchmark is followed by `python -m benchmarks.tables`; tests/project/test_figures.py runs the check.

Adding a figure: append a `Figure(name, file, path, fmt[, get])` to a list below (file under
benchmarks/results/; path: dotted keys, `*` or `{a,b}` for a list (see `dig`), or, with `get`, what the
value is computed from; fmt: the page's rounding, half up from the JSON's decimal text) and put its
markers where the page quotes it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmarks import memory as mem
from benchmarks.common import ROOT

RESULTS = ROOT / "benchmarks" / "results"
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"<!-- fig:(?P<id>[a-z0-9-]+) -->(?P<text>.*?)<!-- /fig -->", re.S)
LINE_START = re.compile(r"\s{0,3}([-*+]\s+|\d+\.\s+|>\s*)?<!-- fig:")

Fmt = Callable[[Any], str]
Getter = Callable[[Any], Any]


# --- the pages' rounding ----------------------------------------------------------------------------

def _s(x: float, d: int, comma: bool = False, sign: bool = False) -> str:
    # repr() gives the shortest decimal text of the float, the digits a person reads in the JSON
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_UP)
    out = f"{q:,f}" if comma else f"{q:f}"
    return "+" + out if sign and q > 0 else out


def num(d: int = 0, comma: bool = False, sign: bool = False, scale: float = 1.0) -> Fmt:
    return lambda v: _s(v * scale, d, comma, sign)


def seq(d: int | tuple[int, ...], sep: str = ", ", comma: bool = False, sign: bool = False,
        scale: float = 1.0) -> Fmt:
    """A list of values joined by `sep`; `d` per item where the page rounds them differently."""
    def fmt(v: Any) -> str:
        ds = d if isinstance(d, tuple) else (d,) * len(v)
        return sep.join(_s(x * scale, k, comma, sign) for x, k in zip(v, ds, strict=True))
    return fmt


def span(d: int = 0, sep: str = "-", scale: float = 1.0) -> Fmt:
    """min-max of a list: "232-250"."""
    return lambda v: f"{_s(min(v) * scale, d)}{sep}{_s(max(v) * scale, d)}"


def ci(d: int = 1, sign: bool = False) -> Fmt:
    """An interval dict {mean, low, high}: "82.7 [72.7, 93.7]"."""
    return lambda v: f"{_s(v['mean'], d, sign=sign)} [{_s(v['low'], d)}, {_s(v['high'], d)}]"


def med(d: int = 2) -> Fmt:
    """A repeats dict {median, min, max}: "1.10 (0.97-1.17)"."""
    return lambda v: f"{_s(v['median'], d)} ({_s(v['min'], d)}-{_s(v['max'], d)})"


def minutes_seconds(v: float) -> str:
    """"6 min 55 s" for 415.4 seconds."""
    whole = int(v + 0.5)
    return f"{whole // 60} min {whole % 60} s"


# --- a figure and the pages -------------------------------------------------------------------------

def _at(doc: Any, key: str | int) -> Any:
    return doc[int(key)] if isinstance(doc, list) else doc[key]


def dig(doc: Any, path: str) -> Any:
    """The value at dotted keys; a key `*` (every item of a list or dict) or `{a,b}` (whole or part of a key:
    `recall@5_{any,all}`) gives the list of the values under each, flat however many the path holds."""
    head, _, rest = path.partition(".")
    alt = re.fullmatch(r"(.*)\{(.*)\}(.*)", head)
    if head != "*" and not alt:
        return dig(_at(doc, head), rest) if rest else _at(doc, head)
    keys = (range(len(doc)) if isinstance(doc, list) else list(doc)) if head == "*" else \
        [alt[1] + k + alt[3] for k in alt[2].split(",")]
    got = [dig(_at(doc, k), rest) if rest else _at(doc, k) for k in keys]
    return [x for g in got for x in g] if "*" in rest or "{" in rest else got


@lru_cache(maxsize=None)
def _load(path: Path) -> Any:
    return json.loads(path.read_text())


_results = [RESULTS]  # the folder the figures are read from: render(results=) points it elsewhere


def load(file: str) -> Any:
    return _load(_results[0] / file)


@dataclass(frozen=True)
class Figure:
    name: str  # the figure in words; its marker id is the slug of it
    file: str  # under benchmarks/results/
    path: str  # dotted keys in it, or (with `get`) what the value is computed from
    fmt: Fmt  # the value as the page writes it
    get: Getter | None = None  # computes the value from the loaded file

    @property
    def id(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")

    def text(self) -> str:
        doc = load(self.file)
        return self.fmt(self.get(doc) if self.get else dig(doc, self.path))


# --- figures computed from a file's raw data --------------------------------------------------------
# Intervals and differences are bootstrapped by agent_r1.evaluation.stats (seeded, so exact) from the
# per-question scores in the files, with the same function and defaults the benchmarks use.

def _learning_run(doc: Any, seed: str, variant: str) -> Any:
    per = doc["per_seed"][seed]
    return per["warm_start"] if variant == "warm_start" else per["runs"][variant]


def learning_seeds(variant: str, key: str) -> Getter:
    """One value per seed of a learning.py result file, in seed order ("warm_start" for the warm start)."""
    return lambda doc: [dig(_learning_run(doc, str(s), variant), key) for s in doc["seeds"]
                        if str(s) in doc["per_seed"]]


def seed_rows(table: str, file: str, variants: tuple[str, ...], mean_ci: str = "") -> list[Figure]:
    """A learning.py file's table rows: per variant, its greedy EM mean [CI] (the figure `mean_ci`, if
    the table has it), then its greedy and its sampled EM per seed."""
    return [f for v in variants for f in (
        [Figure(f"{table}, {v}: {mean_ci}", file, f"summary.{v}.greedy_em_ci95", ci(1))] if mean_ci else []) + [
        Figure(f"{table}, {v}: {mode} EM per seed", file, f"per_seed.*.{v}.{mode}.em", seq(0),
               learning_seeds(v, f"{mode}.em")) for mode in ("greedy", "sampled")]]


def learning_diff(a: str, b: str) -> Getter:
    """Paired bootstrap of a - b over a learning.py file's seeds and questions."""
    def get(doc: Any) -> dict[str, float]:
        from agent_r1.evaluation.stats import paired_difference_ci
        rows = [[[100.0 * x for x in _learning_run(doc, str(s), v)["greedy"]["em_per_question"]]
                 for s in doc["seeds"]] for v in (a, b)]
        return paired_difference_ci(*rows).to_dict()
    return get


PAPER_DS = "synthetic_test"


def _paper_rows(doc: Any, kind: str, name: str) -> list[list[float]]:
    return [[100.0 * x for x in doc["per_seed"][str(s)][kind][name]["em_per_question"][PAPER_DS]]
            for s in doc["seeds"]]


def paper_cell(kind: str, name: str) -> Getter:
    def get(doc: Any) -> dict[str, float]:
        from agent_r1.evaluation.stats import mean_ci
        return mean_ci(_paper_rows(doc, kind, name)).to_dict()
    return get


def paper_diff(a: str, b: str, kind_b: str = "methods") -> Getter:
    def get(doc: Any) -> dict[str, float]:
        from agent_r1.evaluation.stats import paired_difference_ci
        return paired_difference_ci(_paper_rows(doc, "methods", a), _paper_rows(doc, kind_b, b)).to_dict()
    return get


def paper_seeds(kind: str, name: str, key: str = "em") -> Getter:
    return lambda doc: [doc["per_seed"][str(s)][kind][name]["metrics"][PAPER_DS][key] for s in doc["seeds"]]


def paper_table_rows(table: str, file: str, rows: tuple[tuple[str, str], ...], mean_ci: str) -> list[Figure]:
    """A paper_table.py file's table rows: per (kind, name), its EM mean [CI] and its EM per seed."""
    return [f for kind, n in rows for f in (
        Figure(f"{table}, {n}: {mean_ci}", file, f"per_seed.*.{kind}.{n}.em_per_question", ci(1), paper_cell(kind, n)),
        Figure(f"{table}, {n}: EM per seed", file, f"per_seed.*.{kind}.{n}.metrics.{PAPER_DS}.em", seq(0),
               paper_seeds(kind, n)))]


def gpu_memory(model: str, preset: str, kv: bool = False) -> Getter:
    """[full fine-tuning, LoRA (, the rollout's KV cache)] GiB, as benchmarks/memory.py computes them."""
    def get(doc: Any) -> list[float]:
        from agent_r1.config import load_config
        cfg, m = load_config(ROOT / "configs" / "paper" / f"{preset}.yaml"), mem.QWEN25[model]
        return [mem.learner_gib(m, cfg, lora, doc) for lora in (False, True)] + ([mem.kv_cache_gib(m, cfg)] if kv else [])
    return get


def async_waits(doc: Any, modes: tuple[str, ...]) -> list[float]:
    return [w for m in modes for run in doc["async_speed"]["runs"][m] for w in run["rollout_wait_s"]]


def profile_row(doc: Any, *keys: str) -> list[float]:
    """(seconds, share %) of a profile row that sums these profile.json sections."""
    rows = [s for s in doc["sections"] if s["key"] in keys]
    assert len(rows) == len(keys), keys
    return [sum(s["seconds"]["median"] for s in rows), 100 * sum(s["share"] for s in rows)]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# --- the learning benchmark, the paper table, memory, retrieval, scaling, reliability, the profile ---

L, P = "learning.json", "paper_table_np12k/paper_table.json"
LEARNING_ROWS = ("warm_start", "grpo", "ppo", "grpo_shuffled_rewards", "grpo_async1")
LEARNING: list[Figure] = seed_rows("learning table", L, LEARNING_ROWS, "greedy EM mean [95% CI]") + [
    Figure(f"learning table, {v}: RL wall time per seed", L, f"per_seed.*.runs.{v}.rl_seconds", span(0),
           learning_seeds(v, "rl_seconds"))
    for v in LEARNING_ROWS[1:4]
] + [
    Figure("learning table: SFT seconds, seeds 1 and 2", L, "per_seed.{1,2}.warm_start.sft_seconds", seq(0, " s and ")),
    Figure("learning: seed 0 SFT seconds", L, "per_seed.0.warm_start.sft_seconds", num(0, comma=True)),
    Figure("learning: lift over the warm start, points", L, "GRPO and PPO - warm start, means",
           span(0), lambda doc: [learning_diff(v, "warm_start")(doc)["mean"] for v in ("grpo", "ppo")]),
    Figure("learning: async GRPO per seed", L, "per_seed.*.runs.grpo_async1.greedy.em", seq(0),
           learning_seeds("grpo_async1", "greedy.em")),
    Figure("learning: synchronous GRPO beside async", L, "summary.grpo.greedy_em_mean", num(1)),
    Figure("learning: async RL wall times", L, "per_seed.*.runs.grpo_async1.rl_seconds", span(0),
           learning_seeds("grpo_async1", "rl_seconds")),
    Figure("learning: model parameters", P, "model_params", num(2, scale=1e-6)),  # the same warm starts
] + [  # paired bootstraps over seeds and questions: (the difference, a, b, its sign shown)
    Figure(f"learning: {name}", L, "paired bootstrap of per_seed em_per_question", ci(1, sign=sign),
           learning_diff(a, b))
    for name, a, b, sign in (("GRPO - warm start", "grpo", "warm_start", True),
                             ("PPO - warm start", "ppo", "warm_start", True), ("GRPO - PPO", "grpo", "ppo", True),
                             ("shuffled control - warm start", "grpo_shuffled_rewards", "warm_start", True),
                             ("async - sync GRPO", "grpo_async1", "grpo", False))
] + [
    # README's "Two commands" summary of the same benchmark (the make-run figures there are not covered here)
    Figure("two commands: PPO held-out EM", L, "summary.ppo.greedy_em_mean", num(1)),
    Figure("two commands: warm start EM", L, "summary.warm_start.greedy_em_mean", num(0)),
    Figure("two commands: minutes of RL, GRPO and PPO", L, "summary.{grpo,ppo}.rl_seconds_mean",
           seq(0, " and ", scale=1 / 60)),
    Figure("two commands: shuffled rewards EM", L, "summary.grpo_shuffled_rewards.greedy_em_mean", num(0)),
]

T3 = (("baselines", "direct"), ("baselines", "rag"), ("baselines", "agent"), ("methods", "ppo"), ("methods", "grpo"),
      ("methods", "reinforce_pp"), ("methods", "reinforce_pp_baseline"), ("methods", "rloo"))
T4 = ("ppo", "ppo_adv_mask_off", "ppo_masks_off", "grpo", "grpo_loss_mask_off")
PAPER: list[Figure] = paper_table_rows("paper table 3", P, T3, "EM mean [95% CI]") + paper_table_rows(
    "paper table 4", P, tuple(("methods", n) for n in T4), "EM mean [95% CI]") + [
    # paired bootstraps: (the difference, a, b, b's kind, its sign shown)
    Figure(f"paper: {name}", P, "paired bootstrap", ci(1, sign=sign), paper_diff(a, b, kind))
    for name, a, b, kind, sign in (
        ("PPO - warm start", "ppo", "agent", "baselines", True), ("RLOO - warm start", "rloo", "agent", "baselines", True),
        ("GRPO - PPO", "grpo", "ppo", "methods", True), ("GRPO - REINFORCE++", "grpo", "reinforce_pp", "methods", False),
        ("PPO masks off - PPO", "ppo_masks_off", "ppo", "methods", True),
        ("PPO advantage mask off - PPO", "ppo_adv_mask_off", "ppo", "methods", False),
        ("GRPO loss mask off - GRPO", "grpo_loss_mask_off", "grpo", "methods", False))
] + [
    Figure("paper: RLOO and REINFORCE++-baseline - PPO", P, "paired bootstrap, means", seq(1, sign=True),
           lambda doc: [paper_diff(m, "ppo")(doc)["mean"] for m in ("rloo", "reinforce_pp_baseline")]),
    Figure("paper: RLOO - REINFORCE++", P, "paired bootstrap, mean", num(1),
           lambda doc: paper_diff("rloo", "reinforce_pp")(doc)["mean"]),
    Figure("paper: REINFORCE++-baseline - REINFORCE++", P, "paired bootstrap, mean", num(1),
           lambda doc: paper_diff("reinforce_pp_baseline", "reinforce_pp")(doc)["mean"]),
    Figure("paper: the collapsed seed, advantage mask off", P, "min per_seed.*.methods.ppo_adv_mask_off EM",
           num(0), lambda doc: min(paper_seeds("methods", "ppo_adv_mask_off")(doc))),
    Figure("paper: naive RAG supporting-fact recall", P, "per_seed.*.baselines.rag.metrics...support_recall",
           span(0), paper_seeds("baselines", "rag", "support_recall")),
    Figure("paper: wall time of the paper's rows, minutes", P, "wall_seconds_per_call.0 (the call that ran them)",
           num(0, scale=1 / 60), lambda doc: doc.get("wall_seconds_per_call", [doc["wall_seconds"]])[0]),
    Figure("results: model parameters", P, "model_params", num(2, scale=1e-6)),
] + [
    # README's "Two commands" summary of the paper table
    Figure("two commands: GRPO, RLOO, REINFORCE++-baseline", P, "their EM means, rounded", span(0),
           lambda doc: [round(paper_cell("methods", m)(doc)["mean"])
                        for m in ("grpo", "rloo", "reinforce_pp_baseline")]),
    Figure("two commands: paper PPO", P, "PPO EM mean", num(0),
           lambda doc: paper_cell("methods", "ppo")(doc)["mean"]),
    Figure("two commands: paper REINFORCE++", P, "REINFORCE++ EM mean", num(0),
           lambda doc: paper_cell("methods", "reinforce_pp")(doc)["mean"]),
]

M, D = "memory.json", "activation_bytes_per_token"
MEMORY: list[Figure] = [
    Figure("memory: update peak, 64 rows, micro-batch 4", M, "results.update/rows64_micro4_fp32.peak_rss_mib",
           num(2, scale=1 / 1024)),
    Figure("memory: target", M, "target_gib", num(0)),
    Figure("memory: spread over 8-64 rows", M, "derived.rows_spread_mib", num(0)),
    Figure("memory: agent-r1 train peak, 32 trajectories", M, "results.train/e2e.peak_rss_mib",
           num(2, scale=1 / 1024)),
    Figure("memory: output-head chunk", M, "derived.head_bytes_per_chunk_position_fp32", num(0, scale=1024 / 2**30)),
    Figure("memory: output head per position, MiB", M, "derived.head_bytes_per_chunk_position_fp32",
           num(1, scale=1 / 2**20)),
    Figure("memory: output-head chunk in bf16, GiB", M, "derived.head_chunk_mib_bf16", num(2, scale=1 / 1024)),
    Figure("memory: activations per layer and fixed", M, f"derived.{D}_{{layer_hidden,hidden_fixed}}_bf16",
           seq(2, " bytes per token per hidden unit for each layer plus ")),
    Figure("memory: activations fixed, checkpointing", M, f"derived.{D}_hidden_fixed_bf16_ckpt", num(2)),
    Figure("memory: GPU table note, activations", M, f"derived.{D}_*_bf16[_ckpt] (memory.activation_per_layer)",
           lambda v: "{} bytes per layer + {} (checkpointing; {} per layer + {} without)".format(
               num(1)(v[0]), *map(num(2), v[1:])),
           lambda d: [mem.activation_per_layer(d["derived"], True),
                      *(d["derived"][f"{D}_{k}"] for k in ("hidden_fixed_bf16_ckpt", "layer_hidden_bf16",
                                                           "hidden_fixed_bf16"))]),
] + [
    Figure(f"memory cpu table: {name}", M, f"results.{name}: peak, before the update, the update's share",
           lambda r: " | ".join("-" if k not in r else f"{num(2, scale=1 / 1024)(r[k])} GiB" for k in (
               "peak_rss_mib", "rss_before_update_mib", "update_share_mib")),
           lambda d, n=name: d["results"][n])
    for name in ("update/rows8_micro4_fp32", "update/rows8_micro2_fp32", "update/rows8_micro8_fp32", "train/e2e",
                 "update/rows64_micro4_fp32", "body/rows4_micro1_bf16", "body/rows4_micro4_bf16",
                 "body/rows4_micro1_bf16_ckpt", "body/rows4_micro4_bf16_ckpt", "update/rows8_micro4_bf16",
                 "update/rows8_micro4_fp32_ckpt", "update/rows8_micro4_bf16_ckpt", "update/rows16_micro4_fp32",
                 "update/rows32_micro4_fp32")
] + [
    Figure(f"memory: GPU learner, {model} {preset}", M, f"memory.learner_gib over derived, {preset}.yaml",
           seq(0, " GiB | "), gpu_memory(model, preset))
    for model in ("Qwen2.5-1.5B", "Qwen2.5-3B") for preset in ("grpo", "ppo")
] + [
    f for model in ("Qwen2.5-1.5B", "Qwen2.5-3B", "Qwen2.5-7B") for f in [
        Figure(f"memory GPU table: {model} parameters", M, "memory.params of its shape", num(2, scale=1e-9),
               lambda _, m=model: mem.params(mem.QWEN25[m])["total"])] + [
        Figure(f"memory GPU table: {model} {preset}", M, f"memory.learner_gib and kv_cache_gib, {preset}.yaml",
               seq(0, " GiB | "), gpu_memory(model, preset, kv=True)) for preset in ("grpo", "reinforce_pp", "ppo")]
]

RT, RS, RL = "retrieval.json", "retrieval_scale.json", "retriever_load.json"
RETRIEVAL_ROWS = (("BM25 (tantivy)", "tantivy"), ("dense, MiniLM-L6, faiss flat", "dense"),
                  ("dense, MiniLM-L6, faiss HNSW", "dense_hnsw"),
                  ("hybrid (BM25 + dense, reciprocal rank fusion k=60)", "hybrid"))
RETRIEVAL: list[Figure] = [
    Figure("retrieval: tantivy, all 400 queries, seconds", RT, "tantivy.search_all_s_median", num(2)),
    Figure("retrieval: tantivy queries/s", RT, "tantivy.queries_per_s", num(0, comma=True)),
    Figure("retrieval: tantivy recall@5", RT, "tantivy.recall@5_{any,all}", seq(3, " / all ")),
    Figure("retrieval: Elasticsearch recall@5", RT, "elasticsearch.recall@5_{any,all}", seq(2, " / ")),
    Figure("retrieval: top-1 agreement", RT, "top1_agreement.top1", num(1, scale=100)),
    Figure("retrieval: hybrid - BM25, recall all", RT, "hybrid_minus_bm25_recall_all", num(3)),
] + [
    Figure(f"retrieval table: {key}", RT, f"{key}.{{recall@5_any,recall@5_all,queries_per_s}}",
           lambda v: f"{num(3)(v[0])} | {num(3)(v[1])} | {num(0, comma=True)(v[2])}")
    for label, key in RETRIEVAL_ROWS
] + [
    Figure("retrieval scale: 1M index MiB", RS, "builds.2.index_mib", num(0)),
    Figure("retrieval scale: 1M build seconds", RS, "builds.2.build_s", num(0)),
    Figure("retrieval scale: 1M generation seconds", RS, "builds.2.generation_s", num(0)),
    Figure("retrieval scale: recall@5 at every size", RS, "min quality.*.recall@5", num(1),
           lambda d: min(q["recall@5"] for q in d["quality"])),
    Figure("retrieval scale: entity queries/s", RS, "search_entity_queries[processes=1].qps",
           seq(0, " / ", comma=True),
           lambda d: [q["qps"] for q in d["search_entity_queries"] if q["processes"] == 1]),
    Figure("retrieval scale: 1M entity latency", RS, "quality[1M, entity].latency_ms.{p50,p99}",
           seq((2, 1), " ms, p99 "),
           lambda d: [next(q for q in d["quality"] if q["passages"] == 1_000_000 and q["form"] == "entity")
                      ["latency_ms"][k] for k in ("p50", "p99")]),
    Figure("retrieval scale: target", RS, "target_qps_1_process_1M", num(0, comma=True)),
    Figure("retrieval scale: question queries' time in tantivy's search, %", RS,
           "profile_at_largest.question.{tantivy_search_us,total_us}", lambda v: num(0)(100 * v[0] / v[1])),
    Figure("retrieval scale: question queries/s", RS, "search_question_queries[processes=1].qps",
           seq(0, " / ", comma=True),
           lambda d: [q["qps"] for q in d["search_question_queries"] if q["processes"] == 1]),
] + [
    Figure(f"retrieval scale: passages with \"{w}\"", RS, f"profile_at_largest.question_words_alone.{w}.doc_freq_text",
           num(0, scale=100 / 1_000_000)) for w in ("was", "born")
] + [
    Figure("retrieval scale: Elasticsearch bulk docs/s", RS, "elasticsearch_bulk.docs_per_s", num(0, comma=True)),
    Figure("retriever load: queries/s", RL, "qps", num(0, comma=True)),
    Figure("retriever load: batch latency p50 / p99", RL, "batch_latency_ms.{p50,p99}", seq(0, " ms / p99 ")),
    Figure("retriever load: errors, lost, differing", RL, "{errors,lost_results,results_differing_from_single_process}",
           lambda v: "{} errors, {} lost results, {} results differing".format(*v)),
    Figure("ES workers: server connections", RL, "elasticsearch_workers.runs.*.server_connections_peak", seq(0, " / ")),
    Figure("ES workers: queries/s", RL, "elasticsearch_workers.runs.*.qps", seq(1, " / ")),
    Figure("ES workers: batch p50 seconds", RL, "elasticsearch_workers.runs.*.batch_latency_ms.p50",
           seq(1, " / ", scale=1e-3)),
]

S = "scale.json"
A = "async_speed"
SCALE: list[Figure] = [
    Figure("async: one worker speed-up", S, f"{A}.speedup_paired_median.async_1_one_worker", num(2)),
    Figure("async: one worker s per iteration", S, f"{A}.iteration_s_median.{{async_1_one_worker,sync_one_worker}}",
           seq(2, " s against ")),
    Figure("async: earlier 3-repeat run, one worker", S, f"{A}.earlier_runs.3.speedup_sync_over_async_one_worker",
           num(2)),
    Figure("async: target", S, f"{A}.target_speedup", num(1)),
    Figure("async: two workers speed-up", S, f"{A}.speedup_paired_median.async_1", num(2)),
    Figure("async: earlier 3-repeat run, two workers", S, f"{A}.earlier_runs.3.speedup_sync_over_async", num(2)),
    Figure("async: learner wait, asynchronous", S, f"median of {A}.runs.async_*.rollout_wait_s", num(2),
           lambda d: median(async_waits(d, ("async_1", "async_1_one_worker")))),
    Figure("async: learner wait, synchronous", S, f"min-max of {A}.runs.sync*.rollout_wait_s", span(1),
           lambda d: async_waits(d, ("sync", "sync_one_worker"))),
    Figure("async: earlier session on a shared machine", S, f"{A}.earlier_runs.{{0,1,2}}.speedup_sync_over_async",
           span(2, sep="x-")),
    Figure("scale grid: medians", S, "scale_grid.iteration_s_median.*", span(2)),
    Figure("scale grid: 1x1", S, "scale_grid.iteration_s_median.1w_1l", num(2)),
    Figure("scale grid: per cell", S, "scale_grid.iteration_s_median.{1w_1l,2w_1l,1w_2l,2w_2l}", seq(2, " / ")),
    Figure("scale grid: load", S, "min-max of scale_grid.runs.*.*.loadavg_{before,after}[0]", span(1),
           lambda d: [r[k][0] for rs in d["scale_grid"]["runs"].values() for r in rs
                      for k in ("loadavg_before", "loadavg_after")]),
]

REL = "reliability.json"
RELIABILITY: list[Figure] = [
    Figure("reliability: hostile inputs", REL, "inputs_tried", num(0, comma=True)),
    Figure("reliability: fuzzed model outputs", REL, "model_outputs_tried", num(0, comma=True)),
    Figure("reliability: parser inputs", REL, "parse_inputs_tried", num(0, comma=True)),
    Figure("reliability: faults handled", REL, "faults_handled", num(0)),
    Figure("reliability: fault tests and cases", REL, "fault_tests.handled, fault_test_cases",
           seq(0, " fault tests with "),
           lambda d: [d["fault_tests"]["handled"], d["fault_test_cases"]]),
    Figure("reliability: SIGKILLs", REL, "sigkill_trials", num(0)),
    Figure("reliability: killed and resumed", REL, "killed_and_resumed_cleanly", num(0)),
]

PF = "profile.json"
PROFILE: list[Figure] = [
    Figure("profile: seconds per iteration", PF, "totals.iteration.seconds.median", num(1)),
    Figure("profile: retrieval seconds", PF, "sections[retrieval].seconds.median", num(3),
           lambda d: profile_row(d, "retrieval")[0]),
] + [
    Figure(f"profile row: {label}", PF, f"sections[{', '.join(keys)}]: seconds median, share",
           lambda v: f"{num(2)(v[0])} | {num(1)(v[1])}%", lambda d, ks=keys: profile_row(d, *ks))
    for phase, label, keys in (
        ("rollout", "generate", ("generate",)),
        ("rollout", "env step (tool calls; retrieval 0.003 s of it)", ("env_step",)),
        ("rollout", "prompts, observation tokens, rewards / masks (collate)", ("rest:rollout", "collate")),
        ("update", "log-prob pass (old/ref)", ("logprob_pass",)),
        ("update", "forward", ("forward",)), ("update", "backward", ("backward",)),
        ("update", "grad clip, optimizer step, advantages, other",
         ("grad_clip", "optimizer_step", "rest:prepare", "rest:learn")))
]

VC = "vllm_cpu.json"
VLLM_CPU: list[Figure] = [
    Figure("vllm cpu: vLLM tokens/s", VC, "vllm_tokens_per_s", num(1)),
    Figure("vllm cpu: transformers tokens/s", VC, "transformers_tokens_per_s", num(1)),
    Figure("vllm cpu: weight sync seconds", VC, "weight_sync_s_median", num(3)),
    Figure("vllm cpu: engine start seconds", VC, "vllm_start_s", num(1)),
    Figure("vllm cpu: parameters", VC, "model.parameters", num(1, scale=1e-6)),
    Figure("vllm cpu: log-prob gap at T 0.7", VC, "logprob_gap_max_t07", lambda v: f"{v:.1e}"),
]

VR = "vllm_rollout.json"
VLLM_ROLLOUT: list[Figure] = [
    Figure("README: perf vllm model parameters", "perf_vllm.json", "model.parameters", num(1, scale=1e-6)),
    Figure("scaling: vllm rollout tokens/s, again", VR, "engines.{vllm,transformers}.tokens_per_s_median",
           seq(1, " against ")),
    Figure("vllm rollout: vLLM tokens/s", VR, "engines.vllm.tokens_per_s_median", num(1)),
    Figure("vllm rollout: transformers tokens/s", VR, "engines.transformers.tokens_per_s_median", num(1)),
    Figure("vllm rollout: ratio", VR, "vllm_over_transformers", num(2)),
    Figure("vllm rollout: equal work", VR, "equal_work", lambda v: "The work was equal" if v else "NOT EQUAL"),
    Figure("vllm rollout: sampled tokens", VR, "engines.vllm.runs", lambda v: str(v[0]["sampled_tokens"])),
    Figure("vllm rollout: engine start", VR, "engines.vllm.start_s", num(1)),
]

# --- make run over seeds and make test ---------------------------------------------------------------

S = "make_run_seeds.json"
SEEDS = ("0", "1", "2", "3", "4")


def start_to_final(seeds: tuple[str, ...] = SEEDS) -> Getter:
    return lambda doc: " | ".join(f"{doc['per_seed'][s]['start_em']:.0f} -> {doc['per_seed'][s]['final_em']:.0f}"
                                  for s in seeds)


MAKE_RUN: list[Figure] = [
    Figure("make run seeds: EM before and after, per seed", S, "per_seed.*.start_em, final_em", str, start_to_final()),
    Figure("make run seeds: mean EM before and after", S, "summary.{start_em_mean,final_em_mean}", seq(1, " -> ")),
    Figure("make run seeds: lift per seed", S, "per_seed.{0,1,2,3,4}.lift", seq(0, " | ", sign=True)),
    Figure("make run seeds: lift mean and interval", S, "summary.lift_mean, lift_ci95", ci(1, sign=True),
           lambda doc: {"mean": doc["summary"]["lift_mean"], **doc["summary"]["lift_ci95"]}),
    Figure("make run seeds: least lift", S, "summary.lift_min", num(0, sign=True)),
    Figure("make run seeds: one seed's flow, minutes", S, "per_seed.{1,2,3,4}.wall_s", span(0, scale=1 / 60)),
    Figure("make run seeds: seed 0 before and after, 1,000 SFT steps", S, "per_seed.0.start_em, final_em", str,
           start_to_final(("0",))),
    Figure("make run seeds: seed 0 iteration 1 reward, 1,000 SFT steps", S, "per_seed.0.curve.0.reward_mean",
           num(0, scale=100)),
]

# `make test` on a fresh clone (benchmarks/suite_time.py): its wall time, and how many tests each
# of its two sessions (the main suite, the vLLM tests beside it) passed
T = "suite_time.json"
MAKE_RUN += [
    Figure("make test: wall time on a fresh clone", T, "wall_s", minutes_seconds),
    Figure("make test: main suite tests passed", T, "sessions.0.passed", num(0, comma=True)),
    Figure("make test: vLLM tests passed", T, "sessions.1.passed", num(0)),
    Figure("make test: wall time with a third worker", "suite_time_workers3.json", "wall_s", minutes_seconds),
]


# --- docs/performance.md: rollout, update, agent-r1 against TRL --------------------------------------

R, U, T = "perf_rollout.json", "perf_update.json", "perf_trl.json"
EQ = "modes.equal_work.cells"
TOOL = "modes.tool"


FLOOR, SIDES = f"{EQ}.128x256.floor", f"{TOOL}.{{agent_r1,trl}}"
TURNS = "scaling.turns.{1,2,3,4,5}"


def trl_row(cell: str) -> Figure:
    # one entry per row of the equal-work table (s/iter both sides, ratio (range), generation and update
    # tok/s): a failure then shows the whole row as the file gives it
    label = {"32x64": "32 x 64", "32x256": "32 x 256", "128x64": "128 x 64", "128x256": "128 x 256, idle machine"}

    def fmt(c: Any) -> str:
        a, t = c["agent_r1"], c["trl"]
        pair = seq(0, " / ", comma=True)
        return " | ".join([num(2)(a["seconds_per_iteration"]["median"]), num(2)(t["seconds_per_iteration"]["median"]),
                           med(2)(c["ratio_agent_r1_over_trl"]),
                           pair([a["generation_tokens_per_s"]["median"], t["generation_tokens_per_s"]["median"]]),
                           pair([a["update_tokens_per_s"]["median"], t["update_tokens_per_s"]["median"]])])
    return Figure(f"TRL table row {label[cell]}", T, f"{EQ}.{cell}", fmt)


PERF: list[Figure] = [
    Figure("perf: rollout / generate replaying the turns", R, "overhead.rollout_over_raw_replay", med(2)),
    Figure("perf: rollout / one generate call", R, "overhead.rollout_over_raw_generate.median", num(2)),
    Figure("perf: turns per trajectory", R, "overhead.rollout_stats.0.mean_turns", num(1)),
    Figure("perf: searches per trajectory", R, "overhead.rollout_stats.0.tool_calls / trajectories", num(0),
           lambda d: (lambda s: s["tool_calls"] / s["trajectories"])(d["overhead"]["rollout_stats"][0])),
    Figure("perf: rollout sampled tokens", R, "overhead.rollout_stats.0.sampled_tokens", num(0)),
    Figure("perf: rollout tokens in all", R, "overhead.rollout_stats.0.total_tokens", num(0, comma=True)),
    Figure("perf: rollout tokens/s", R, "overhead.rollout_tokens_per_s.median", num(0)),
    Figure("perf: replay tokens/s", R, "overhead.raw_replay_tokens_per_s.median", num(0)),
    Figure("perf: tantivy searches in the rollout", R, "overhead.rollout_stats.0.tool_calls", num(0)),
    Figure("perf: one generate call tokens/s", R, "overhead.raw_generate_tokens_per_s.median",
           num(0, comma=True)),
    Figure("perf: tokens per action", R, "overhead.rollout_stats.0: sampled_tokens / (trajectories x turns)",
           num(1), lambda d: (lambda s: s["sampled_tokens"] / (s["trajectories"] * s["mean_turns"]))(
               d["overhead"]["rollout_stats"][0])),
    Figure("perf: KV reuse off", R, "speedups.no_kv_reuse.seconds_over_all_on.median", num(2)),
    Figure("perf: one trajectory at a time", R, "speedups.one_at_a_time.seconds_over_all_on.median", num(2)),
    Figure("perf: none of the speed-ups", R, "speedups.none_of_them.seconds_over_all_on.median", num(2)),
    Figure("perf: finished rows kept", R, "speedups.no_early_drop.seconds_over_all_on.median", num(2)),
    Figure("perf: rollout peak RSS", R, "peak_rss_mb", num(0)),
    Figure("perf: seconds for 8 / 32 / 128 trajectories", R, "scaling.trajectories.{8,32,128}.seconds.median",
           seq(2, " / ")),
    Figure("perf: ms per trajectory", R, "scaling.trajectories.{8,32,128}.ms_per_trajectory", seq(1, " / ")),
    Figure("perf: time exponent", R, "scaling.time_exponent_8_to_128_trajectories", num(2)),
    Figure("perf: seconds per max turns 1..5", R, f"{TURNS}.seconds.median", seq(2, " / ")),
    Figure("perf: turns taken per max turns", R, f"{TURNS}.mean_turns", seq((1, 1, 1, 1, 2), " / ")),
    Figure("perf: tokens processed, 1 and 5 turns", R, "scaling.turns.{1,5}.total_tokens", seq(0, " -> ", comma=True)),
    Figure("perf: update / bare torch", U, "trainer_over_bare", med(2)),
    Figure("perf: tokens per update", U, "config.tokens_per_update", num(0, comma=True)),
    Figure("perf: update vs bare tokens/s", U, "tokens_per_s.{trainer_update,bare_torch}.median",
           seq(0, " vs ", comma=True)),
    Figure("perf: update per-repeat ratios", U, "trainer_over_bare.runs", seq(2)),
    Figure("perf: update load at start", U, "machine.load_average_at_start.0", num(1)),
    Figure("perf: update peak RSS", U, "peak_rss_mb", num(0, comma=True)),
    Figure("perf: agent-r1 / TRL equal work, idle", T, f"{EQ}.128x256.ratio_agent_r1_over_trl", med(2)),
    Figure("perf: floor / TRL, table", T, f"{EQ}.128x256.floor.ratio_over_trl.median", num(2)),
    Figure("perf: skip_zero_advantage / TRL", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.ratio_over_trl",
           med(2)),
    Figure("perf: rows skipped", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.skipped_rows_fraction.median",
           num(0, scale=100)),
    Figure("perf: skip ratio, prose", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.ratio_over_trl.median",
           num(2)),
    Figure("perf: agent-r1 / TRL with a tool", T, f"{TOOL}.ratio_agent_r1_over_trl", med(2)),
    Figure("perf: tool calls per trajectory, warm-up", T, f"{TOOL}.checks.tool_calls_per_trajectory_warmup.*",
           seq(3, " vs ")),
    Figure("perf: tool calls per trajectory, timed", T, f"{SIDES}.per_trajectory.tool_calls", seq(2, " vs ")),
    Figure("perf: tool s per iteration", T, f"{SIDES}.seconds_per_iteration.median", seq(1, " vs ")),
    Figure("perf: tool generation tokens/s", T, f"{SIDES}.generation_tokens_per_s.median", seq(0, " vs ")),
    Figure("perf: tool update tokens/s", T, f"{SIDES}.update_tokens_per_s.median", seq(0, " vs ", comma=True)),
    Figure("perf: floor seconds per iteration", T, f"{FLOOR}.seconds_per_iteration.median", num(2)),
    Figure("perf: floor generate + update", T, f"{FLOOR}.{{generate_s,update_s}}.median", seq(2, " generate + ")),
    Figure("perf: floor / TRL", T, f"{FLOOR}.ratio_over_trl", med(2)),
    Figure("perf: agent-r1 / floor", T, f"{FLOOR}.ratio_agent_r1_over_floor", med(2)),
    Figure("perf: agent-r1 over the floor, %", T, f"{FLOOR}.ratio_agent_r1_over_floor.median",
           lambda v: num(0, scale=100)(v - 1)),
    Figure("perf: TRL version", T, "trl", str),
    Figure("perf: TRL comparison peak RSS", T, "peak_rss_mb", num(0, comma=True)),
] + [trl_row(c) for c in ("32x64", "32x256", "128x64", "128x256")]


# --- the objectives beyond GRPO ----------------------------------------------------------------------

O = "learning_objectives.json"
OBJ_ROWS = (("SFT warm start", "warm_start"), ("GRPO", "grpo"), ("GSPO", "gspo"), ("CISPO", "cispo"),
        ("Dr. GRPO", "dr_grpo"), ("DAPO", "dapo"), ("GiGPO", "gigpo"))


OBJECTIVES: list[Figure] = seed_rows("objectives table", O, tuple(v for _, v in OBJ_ROWS), "greedy EM mean [CI]") + [
    Figure(f"objectives table, {v}: minus GRPO, paired", O, f"summary.{v}.minus_grpo_ci95", ci(1, sign=True))
    for label, v in OBJ_ROWS[2:]
] + [
    Figure(f"objectives table, {v}: RL seconds on seed 2", O, f"per_seed.2.runs.{v}.rl_seconds", num(0))
    for label, v in OBJ_ROWS[1:]
] + [
    Figure("objectives: sampled EM span over the RL rows", O, "per_seed.*.runs.*.sampled.em", span(0)),
    Figure("objectives: DAPO's prompts rolled out per seed", O, "per_seed.*.runs.dapo.train_curve.*.dynamic/"
           "prompts_sampled (sums)", seq(0, comma=True),
           lambda doc: [sum(c["dynamic/prompts_sampled"] for c in doc["per_seed"][s]["runs"]["dapo"]["train_curve"])
                        for s in ("0", "1", "2")]),
    Figure("objectives: DAPO's most rounds in an iteration", O, "max per_seed.*.runs.dapo...dynamic/rounds", num(0),
           lambda doc: max(c["dynamic/rounds"] for one in doc["per_seed"].values()
               for c in one["runs"]["dapo"]["train_curve"])),
    Figure("objectives: the other rows' prompts per run", O, "config: train.iterations x train.prompts_per_iter",
           num(0), lambda doc: doc["recipe"]["train"]["iterations"] * doc["recipe"]["train"]["prompts_per_iter"]),
    Figure("objectives: DAPO and GRPO RL seconds, seed 2", O, "per_seed.2.runs.{dapo,grpo}.rl_seconds",
           seq(0, " s on seed 2 against GRPO's ")),
    Figure("objectives: the other rows' RL seconds, seed 2", O, "per_seed.2.runs.{gspo,cispo,dr_grpo,gigpo}.rl_seconds",
           span(0)),
]

# the same objectives on the paper table's recipe (4 samples per prompt, the 500-step warm starts), today's code,
# GRPO rerun beside them: benchmarks/results/paper_table_objectives (paper_table.py --methods grpo,gspo,...)
PO = "paper_table_objectives/paper_table.json"
OBJECTIVES += paper_table_rows("paper-recipe objectives", PO, tuple(("methods", v) for _, v in OBJ_ROWS[1:]),
                               "EM mean [CI]") + [
    Figure(f"paper-recipe objectives, {v}: minus GRPO", PO, "paired bootstrap", ci(1, sign=True),
           paper_diff(v, "grpo"))
    for label, v in OBJ_ROWS[2:]
] + [
    Figure("paper-recipe objectives: warm start (agent) per seed", PO, "per_seed.*.baselines.agent...em", seq(0),
           paper_seeds("baselines", "agent")),
    Figure("paper-recipe objectives: warm start (agent) mean [CI]", PO, "per_seed.*.baselines.agent", ci(1),
           paper_cell("baselines", "agent")),
]


NP12K = "paper_table_np12k/paper_table.json"  # the recorded paper table, by the code of commit b018462


def _em(seed: str, kind: str, name: str) -> Getter:
    """One seed's in-domain held-out EM of a row (a baseline or a method) in a paper_table.py file."""
    return lambda doc: doc["per_seed"][seed][kind][name]["metrics"][PAPER_DS]["em"]


def _first_right(seed: str) -> Getter:
    """How many answers of GRPO's first rollout were right (its mean reward x prompts x samples)."""
    return lambda doc: (doc["per_seed"][seed]["methods"]["grpo"]["train_curve"][0]["reward_mean"]
                        * doc["budget"]["prompts_per_iter"] * doc["budget"]["n_samples"])


def _same_baselines(doc) -> int:
    """How many of seed 0's baselines score every question as the recorded paper table's do."""
    old = load(NP12K)["per_seed"]["0"]["baselines"]
    new = doc["per_seed"]["0"]["baselines"]
    return sum(new[b]["em_per_question"] == old[b]["em_per_question"] for b in old)


OBJECTIVES += [
    Figure("paper table vs today's code: seed 0 baselines equal", PO, "seed 0 baselines' em_per_question", num(0),
           _same_baselines),
    Figure("paper table vs today's code: GRPO seed 0 today", PO, "per_seed.0.methods.grpo EM", num(0),
           _em("0", "methods", "grpo")),
    Figure("paper table vs today's code: GRPO seed 0 recorded", NP12K, "per_seed.0.methods.grpo EM", num(0),
           _em("0", "methods", "grpo")),
    Figure("paper table vs today's code: right answers in the first rollout, today", PO,
           "per_seed.0.methods.grpo.train_curve.0.reward_mean x 64", num(0), _first_right("0")),
    Figure("paper table vs today's code: right answers in the first rollout, recorded", NP12K,
           "per_seed.0.methods.grpo.train_curve.0.reward_mean x 64", num(0), _first_right("0")),
    Figure("paper table vs today's code: rollouts per iteration", PO, "budget prompts_per_iter x n_samples", num(0),
           lambda doc: doc["budget"]["prompts_per_iter"] * doc["budget"]["n_samples"]),
    Figure("paper table vs today's code: GRPO seed 2 today", PO, "per_seed.2.methods.grpo EM", num(0),
           _em("2", "methods", "grpo")),
    Figure("paper-recipe objectives: seed 1's new warm start, agent EM", PO, "per_seed.1.baselines.agent EM", num(0),
           _em("1", "baselines", "agent")),
    Figure("paper table: seed 1's warm start, agent EM", NP12K, "per_seed.1.baselines.agent EM", num(0),
           _em("1", "baselines", "agent")),
    Figure("paper-recipe objectives: seed 2's naive RAG", PO, "per_seed.2.baselines.rag EM", num(0),
           _em("2", "baselines", "rag")),
    Figure("paper table: seed 2's naive RAG", NP12K, "per_seed.2.baselines.rag EM", num(0),
           _em("2", "baselines", "rag")),
    Figure("paper table vs today's code: GRPO seed 2 recorded", NP12K, "per_seed.2.methods.grpo EM", num(0),
           _em("2", "methods", "grpo")),
]


def _ems(doc, seeds: tuple[str, ...]) -> list[float]:
    """Every objective's EM (GRPO included) on these seeds of the paper-recipe file."""
    return [_em(s, "methods", v)(doc) for s in seeds for _, v in OBJ_ROWS[1:]]


OBJECTIVES += [
    Figure("paper-recipe objectives: warm start mean", PO, "per_seed.*.baselines.agent (mean)", num(1),
           lambda doc: paper_cell("baselines", "agent")(doc)["mean"]),
    Figure("paper-recipe objectives: GRPO mean", PO, "per_seed.*.methods.grpo (mean)", num(1),
           lambda doc: paper_cell("methods", "grpo")(doc)["mean"]),
    Figure("paper-recipe objectives: seed 0 span", PO, "per_seed.0.methods.* EM (min-max)", span(0),
           lambda doc: _ems(doc, ("0",))),
    Figure("paper-recipe objectives: seed 1 span", PO, "per_seed.1.methods.* EM (min-max)", span(0),
           lambda doc: _ems(doc, ("1",))),
    Figure("paper-recipe objectives: seeds 2-4 span", PO, "per_seed.{2,3,4}.methods.* EM (min-max)", span(0),
           lambda doc: _ems(doc, ("2", "3", "4"))),
    Figure("paper-recipe objectives: wall minutes", PO, "wall_seconds", num(0, scale=1 / 60)),
    Figure("paper-recipe objectives: calls", PO, "len(wall_seconds_per_call)", num(0),
           lambda doc: len(doc["wall_seconds_per_call"])),
]

OBJECTIVES += [  # README's sentence
    Figure("README: paper-recipe seeds", PO, "len(seeds)", num(0), lambda doc: len(doc["seeds"])),
]


# --- the QA task through the OpenAI endpoint ---------------------------------------------------------

E = "learning_endpoint.json"
EP = "learning_endpoint_prefix.json"  # the endpoint rows again, after per-session prefix reuse
EB = "learning_endpoint_batching.json"  # and after batching every running session's call
EP_ROWS = (("SFT warm start (chat demos)", "warm_start"), ("GRPO, built-in env (hermes)", "grpo_hermes"),
        ("GRPO through the endpoint (`openai` agent)", "grpo_endpoint"))
END = "summary.grpo_endpoint"
OVERHEAD = f"{END}.overhead_s_per_iteration_over_grpo_hermes"
CURVES = "per_seed.*.runs.grpo_endpoint.train_curve"
def _iterations(doc) -> list[dict]:
    """The endpoint row's training curve, every seed's iterations one after the other."""
    return [c for curve in learning_seeds("grpo_endpoint", "train_curve")(doc) for c in curve]


def rerun_figures(label: str, file: str) -> list[Figure]:
    """The endpoint rows measured again after a change: seeds, overhead, both rows' seconds and greedy EM."""
    return [
        Figure(f"{label}: seeds", file, "seeds", seq(0, sep=" and ")),
        Figure(f"{label}: overhead per iteration", file, OVERHEAD, ci(2, sign=True)),
        Figure(f"{label}: built-in seconds per iteration", file, "summary.grpo_hermes.seconds_per_iteration", ci(2)),
        Figure(f"{label}: endpoint seconds per iteration", file, f"{END}.seconds_per_iteration", ci(2)),
        *(Figure(f"{label}: {name} greedy EM per seed", file, f"per_seed.*.{row}.greedy.em", seq(0),
                 learning_seeds(row, "greedy.em"))
          for name, row in (("built-in", "grpo_hermes"), ("endpoint", "grpo_endpoint")))]


ENDPOINT: list[Figure] = seed_rows("endpoint table", E, tuple(v for _, v in EP_ROWS)) + [
    Figure(f"endpoint table, {v}: seconds per iteration", E, f"summary.{v}.seconds_per_iteration",
           ci(2)) for label, v in EP_ROWS[1:]
] + [
    Figure("endpoint: minus built-in, paired", E, f"{END}.minus_grpo_hermes_ci95", ci(1, sign=True)),
    Figure("endpoint: seeds in the paired difference", E, f"{END}.minus_grpo_hermes_ci95.seeds", num(0)),
    Figure("endpoint: mean over seeds", E, f"{END}.greedy_em_mean", num(1)),
    Figure("built-in: mean over seeds", E, "summary.grpo_hermes.greedy_em_mean", num(1)),
    Figure("endpoint: SFT seconds, seed 0", E, "per_seed.0.warm_start.sft_seconds", num(0, comma=True)),
    Figure("endpoint: SFT seconds, seeds 1 and 2", E, "per_seed.*.warm_start.sft_seconds",
           seq(0, sep=" and ", comma=True), lambda doc: learning_seeds("warm_start", "sft_seconds")(doc)[1:]),
    Figure("endpoint: greedy EM through its agent", E, "per_seed.*.grpo_endpoint.greedy_agent.em", seq(0),
           learning_seeds("grpo_endpoint", "greedy_agent.em")),
    Figure("endpoint: overhead per iteration", E, OVERHEAD, ci(2, sign=True)),
    # the same rows again after each session kept its prefix between calls, then after the endpoint
    # batched every running session's call (benchmarks/learning.py --chat --variants
    # grpo_hermes,grpo_endpoint), paired by seed and iteration
    *rerun_figures("endpoint with prefix reuse", EP),
    *rerun_figures("endpoint with batching", EB),
    Figure("endpoint with batching: engine share of the rollout", EB, f"{CURVES}.*.agent/engine_s / rollout_s",
           num(0, scale=100), lambda doc: sum(c["agent/engine_s"] for c in _iterations(doc))
           / sum(c["rollout_s"] for c in _iterations(doc))),
    Figure("endpoint with batching: engine calls per iteration", EB, f"{CURVES}.*.agent/engine_calls (mean)",
           num(1), lambda doc: statistics.mean(c["agent/engine_calls"] for c in _iterations(doc))),
    Figure("endpoint with batching: calls per iteration", EB, f"{CURVES}.*.agent/calls (mean)",
           num(0), lambda doc: statistics.mean(c["agent/calls"] for c in _iterations(doc))),
    Figure("endpoint: drift-free iterations", E, f"{CURVES}.*.agent/drift", str,
           lambda doc: sum(c["agent/drift"] == 0 for c in _iterations(doc))),
    Figure("endpoint: most split sessions", E, f"{CURVES}.*.agent/drift", num(0),
           lambda doc: max(c["agent/drift"] for c in _iterations(doc))),
    Figure("endpoint: no agent errors", E, f"{CURVES}.*.agent/errors", num(0),
           lambda doc: sum(c["agent/errors"] for c in _iterations(doc))),
]


# --- vLLM as the engine, whole iterations ------------------------------------------------------------

PV = "perf_vllm.json"
PVC = "cells.128x256"
# the table's rows: agent-r1 with the transformers or the vLLM engine (weight sync included), TRL's
# `GRPOTrainer` with transformers `generate()` or in its own vLLM mode (colocate)
PV_SIDES = ("agent_r1", "agent_r1_vllm", "trl", "trl_vllm")
COLUMNS = (("seconds per iteration", "seconds_per_iteration", num(2)),
           ("generation tokens/s", "generation_tokens_per_s", num(0, comma=True)),
           ("update tokens/s", "update_tokens_per_s", num(0, comma=True)))
TABLE = [Figure(f"perf vllm table, {side}: {name}", PV, f"{PVC}.sides.{side}.{key}.median", fmt)
         for side in PV_SIDES for name, key, fmt in COLUMNS]
PROSE = [
    Figure("perf vllm: vLLM / transformers engine per iteration", PV, f"{PVC}.ratios.vllm_over_transformers.median",
           num(2)),
    Figure("perf vllm: vLLM / transformers engine, generation", PV,
           f"{PVC}.ratios_generate.vllm_over_transformers.median", num(2)),
    Figure("perf vllm: vLLM / TRL", PV, f"{PVC}.ratios.vllm_over_trl.median", num(2)),
    Figure("perf vllm: vLLM / TRL vLLM mode", PV, f"{PVC}.ratios.vllm_over_trl_vllm.median", num(2)),
    Figure("perf vllm: engine start", PV, f"{PVC}.vllm_start_s", num(1)),
    Figure("perf vllm: weight sync span", PV, f"{PVC}.vllm_sync_s", lambda v: f"{min(v):.2f}-{max(v):.2f}"),
    Figure("perf vllm: parameters", PV, "model.parameters", num(2, scale=1e-6)),
]
README_SENTENCE = [Figure(f"perf vllm README: {side}", PV, f"{PVC}.sides.{side}.seconds_per_iteration.median", num(1))
                   for side in PV_SIDES]
VLLM_PERF: list[Figure] = TABLE + PROSE + README_SENTENCE


# --- precision: bf16 against fp32 (precision_speed.json) ---------------------------------------------

PS = "precision_speed.json"


def bf16_vs_fp32(isa: str, phase: str, key: str, d_ratio: int, d_time: int) -> Figure:
    """A cell "2.6x (4.72 vs 1.81 s)": bf16 / fp32, then each one's seconds."""
    def get(doc: Any) -> str:
        p = doc[isa][phase]
        t = [p[x][key]["median"] if phase == "rl" else p[x][key] for x in ("bf16", "fp32")]
        ratio = p["bf16_over_fp32"]["median"] if phase == "rl" else p["bf16_over_fp32"]
        return f"{_s(ratio, d_ratio)}x ({_s(t[0], d_time)} vs {_s(t[1], d_time)} s)"
    return Figure(f"precision: {phase}, {isa}, bf16 over fp32", PS, f"{isa}.{phase}", str, get)


PRECISION: list[Figure] = [
    bf16_vs_fp32("native", "sft", "s_per_step", 1, 2), bf16_vs_fp32("avx2", "sft", "s_per_step", 1, 1),
    bf16_vs_fp32("native", "rl", "s_per_iteration", 2, 1), bf16_vs_fp32("avx2", "rl", "s_per_iteration", 2, 1),
    Figure("README: bf16 over fp32, RL iteration", PS, "native.rl.bf16_over_fp32.median", num(2)),
]


# --- an outside agent on arithmetic (outside_agent.json) ---------------------------------------------

OA, OAS = "outside_agent.json", "summary"
OUTSIDE_AGENT: list[Figure] = [
    Figure("outside agent: SFT steps", OA, "warm_start.sft_steps", num(0, comma=True)),
    Figure("outside agent: SFT seconds", OA, f"{OAS}.sft_seconds", num(1)),
    Figure("outside agent: RL iterations", OA, "len(curve)", num(0), lambda d: len(d["curve"])),
    Figure("outside agent: drift", OA, f"{OAS}.drift", num(0)),
    Figure("outside agent: training sessions", OA, f"{OAS}.sessions", num(0, comma=True)),
    Figure("outside agent: drift per session", OA, f"{OAS}.drift_per_session", num(1)),
    Figure("outside agent: steps per session", OA, f"{OAS}.steps_per_session", num(1)),
    Figure("outside agent: greedy drift per session", OA, f"{OAS}.greedy_drift_per_session", num(1)),
    Figure("outside agent: held-out questions", OA, f"{OAS}.held_out_n", num(0)),
    Figure("outside agent: held-out EM at each evaluation", OA, "held_out.curve.*.em", seq(0, " -> ")),
    Figure("outside agent: evaluated every", OA, "held_out.curve.1.iteration", num(0)),
    Figure("outside agent: sampling temperature", OA, "overrides[rollout.temperature]", num(1),
           lambda d: d["overrides"]["rollout.temperature"]),
    Figure("outside agent: extra rounds at most", OA, "overrides[algo.dynamic_sampling.max_extra_rounds]", num(0),
           lambda d: d["overrides"]["algo.dynamic_sampling.max_extra_rounds"]),
    Figure("outside agent: seconds per iteration", OA, f"{OAS}.seconds_per_iteration", num(2)),
    Figure("outside agent: greedy tool-first share before", OA, f"{OAS}.tool_first_before", num(0)),
    Figure("outside agent: sampled tool-first share, first and last iteration", OA, "curve.{0,-1}.tool_first_rate",
           seq(0, "% to "), lambda d: [d["curve"][0]["tool_first_rate"], d["curve"][-1]["tool_first_rate"]]),
]

# the objectives in a sentence: from about the warm start to the RL rows' span (README, docs/results.md)
OBJECTIVES += [
    Figure("objectives: warm start", O, "summary.warm_start.greedy_em_mean", num(0)),
    Figure("objectives: greedy EM span", O, "per_seed.*.runs.*.greedy.em", span(0)),
]


# --- the GPU check at tiny size on the CPU (gpu_smoke_cpu_tiny.json) ----------------------------------

GPU_SMOKE: list[Figure] = [
    Figure("gpu smoke, CPU tiny: vLLM runs' iteration 2 log-prob gap", "gpu_smoke_cpu_tiny.json",
           "max runs.vllm_*.iterations.1.rollout/logprob_diff_max", lambda v: f"{v:.1e}",
           lambda d: max(r["iterations"][1]["rollout/logprob_diff_max"] for k, r in d["runs"].items()
                         if k.startswith("vllm"))),
]

FIGURES: list[Figure] = (LEARNING + PAPER + PERF + MEMORY + RETRIEVAL + SCALE + RELIABILITY + PROFILE + MAKE_RUN
                         + VLLM_CPU + VLLM_ROLLOUT + OBJECTIVES + VLLM_PERF + ENDPOINT + PRECISION + OUTSIDE_AGENT
                         + GPU_SMOKE)


# --- rendering the pages ----------------------------------------------------------------------------

def render(text: str, figures: dict[str, Figure]) -> tuple[str, list[str]]:
    """The page with every marker's figure written from its result file, and what was stale in it."""
    stale = []

    def one(m: re.Match[str]) -> str:
        fig = figures.get(m["id"])
        if fig is None:
            stale.append(f"{m['id']}: no such figure in benchmarks/tables.py")
            return m[0]
        try:
            new = fig.text()
        except (OSError, LookupError, TypeError, ValueError, AttributeError) as exc:
            stale.append(f"{m['id']}: cannot read it from benchmarks/results/{fig.file} ({fig.path}): {exc!r}")
            return m[0]
        if new != m["text"]:
            stale.append(f"{m['id']}: the page has {m['text']!r}, benchmarks/results/{fig.file} gives {new!r}")
        return f"<!-- fig:{m['id']} -->{new}<!-- /fig -->"
    return MARKER.sub(one, text), stale


def run(check: bool, results: Path = RESULTS, root: Path = ROOT) -> list[str]:
    """Renders every page from the files in `results`; writes the pages unless `check`. Returns what was
    stale: figures whose page text differs, unknown or unreadable ones, figures no page quotes."""
    _results[0] = results
    figures = {f.id: f for f in FIGURES}
    assert len(figures) == len(FIGURES), "two figures share a name"
    problems, quoted = [], set()
    for page in PAGES:
        text = (root / page).read_text()
        quoted |= {m["id"] for m in MARKER.finditer(text)}
        # a line that opens with `<!--` is an HTML block to Markdown: its text would show raw, outside the paragraph
        problems += [f"{page}:{n}: starts with a figure marker; move a word before it"
                     for n, line in enumerate(text.splitlines(), 1) if LINE_START.match(line)]
        new, stale = render(text, figures)
        problems += [f"{page}: {s}" for s in stale]
        if not check and new != text:
            (root / page).write_text(new)
    return problems + [f"{i}: quoted by no page" for i in sorted(set(figures) - quoted)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale figure")
    args = ap.parse_args(argv)
    if not args.check:
        print(f"{len(run(check=False))} figures rewritten")
    problems = run(check=True)  # after a rewrite: what it could not fix (unreadable, unknown, unquoted)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
