"""PNG figures from the benchmark results (benchmarks/results/*.json), for the README.

    .venv/bin/python -m benchmarks.plots [--results benchmarks/results] [--out docs/img]

Writes, for each result file present (a missing one is skipped and said so):
- bench-learning.png   learning.json: training reward per iteration (each variant), held-out greedy EM
                       of the warm start and after RL (measured at the start and the end only).
- bench-learning-endpoint.png  learning_endpoint.json: the same, built-in env against the
                       OpenAI endpoint.
- bench-memory.png     memory.json: peak RSS against batch rows, update memory against micro-batch
                       size, activation memory against rows (with and without gradient checkpointing).
- bench-scaling.png    scale.json (every section with an `iteration_s_median`: async_speed, scale_grid):
                       seconds per iteration.
- bench-retrieval.png  retrieval.json / retriever_load.json: queries/s per backend and per process count.
- bench-retrieval-scale.png  retrieval_scale.json: tantivy queries/s against corpus size (1 and 4 processes,
                       entity and question queries, the 2,000 q/s target), index build time and size.
                       Also written by benchmarks/retrieval_scale.py itself.
Each figure's titles name the command that produced the data.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt

from benchmarks.common import ROOT

# the command that writes each file, for files that do not record their own `command`
COMMANDS = {"learning": "python -m benchmarks.learning --seeds 0,1,2", "memory": "python -m benchmarks.memory",
            "learning_endpoint": "python -m benchmarks.learning --params params.yaml --chat --seeds 0,1,2 "
                                 "--variants grpo_hermes,grpo_endpoint",
            "scale": "python -m benchmarks.async_speed",
            "retrieval": "python -m benchmarks.retrieval", "retriever_load": "python -m benchmarks.retriever_load",
            "retrieval_scale": "python -m benchmarks.retrieval_scale"}
SHARED = "2 shared cores"


def load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def command(doc: dict[str, Any], name: str) -> str:
    return str(doc.get("command") or COMMANDS.get(name, f"benchmarks/{name}"))


def moving_average(values: list[float], window: int) -> list[float]:
    out = []
    for i in range(len(values)):
        part = values[max(0, i - window + 1):i + 1]
        out.append(sum(part) / len(part))
    return out


def seed_runs(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """variant -> its run per seed ("warm start" first)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for one in doc["per_seed"].values():
        out.setdefault("warm start", []).append(one["warm_start"])
        for variant, run in one["runs"].items():
            out.setdefault(variant, []).append(run)
    return out


def plot_learning(results: Path, out: Path) -> Path | None:
    name = "learning" if (results / "learning.json").is_file() else "learning_quick"
    return learning_figure(results, name, out / "bench-learning.png")


def plot_learning_endpoint(results: Path, out: Path) -> Path | None:
    """The endpoint rows: GRPO in the built-in env and through the OpenAI endpoint, one warm start per seed."""
    return learning_figure(results, "learning_endpoint", out / "bench-learning-endpoint.png")


def learning_figure(results: Path, name: str, path: Path) -> Path | None:
    """A learning.py result file. Left: training reward per iteration, mean over seeds (band: min to
    max over seeds). Right: held-out greedy EM per variant, mean over seeds with its 95% interval (the
    file's summary) and each seed as a dot."""
    doc = load(results, name)
    if not doc or not doc.get("per_seed"):
        return None
    runs = seed_runs(doc)
    summary = doc.get("summary", {})
    fig, (ax_r, ax_e) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    variants = [v for v in runs if v != "warm start"]
    for i, variant in enumerate(variants):
        curves = [[p["reward_mean"] for p in r.get("train_curve") or []] for r in runs[variant]]
        curves = [c for c in curves if c]
        if not curves:
            continue
        n = min(map(len, curves))
        mean = [sum(c[t] for c in curves) / len(curves) for t in range(n)]
        it = list(range(1, n + 1))
        low, high = [min(c[t] for c in curves) for t in range(n)], [max(c[t] for c in curves) for t in range(n)]
        ax_r.fill_between(it, low, high, color=f"C{i}", alpha=0.12, lw=0)
        seeds = f"{len(curves)} seed" + ("s" if len(curves) > 1 else "")
        ax_r.plot(it, moving_average(mean, 5), color=f"C{i}", lw=1.8, label=f"{variant} ({seeds})")
    labels = []
    for j, variant in enumerate(["warm start", *variants]):
        ems = [r["greedy"]["em"] for r in runs[variant] if r.get("greedy")]
        if not ems:
            continue
        ci = summary.get("warm_start" if variant == "warm start" else variant, {}).get("greedy_em_ci95")
        em_mean = sum(ems) / len(ems)
        color = "grey" if variant == "warm start" else f"C{variants.index(variant)}"
        if ci:
            ax_e.errorbar([j], [ci["mean"]], yerr=[[ci["mean"] - ci["low"]], [ci["high"] - ci["mean"]]],
                          fmt="s", color=color, capsize=5, ms=8)
        else:
            ax_e.plot([j], [em_mean], "s", color=color, ms=8)
        ax_e.plot([j + 0.18] * len(ems), ems, "o", color=color, alpha=0.6, ms=4)
        labels.append(f"{variant}\n{em_mean:.1f}")
    ax_e.set_xticks(range(len(labels)), labels, fontsize=7)
    ax_r.set(xlabel="iteration", ylabel="mean reward of the iteration's rollouts",
             title="Training reward: mean over seeds (5-iteration moving average), band: min-max")
    ax_r.legend(fontsize=8)
    ax_r.grid(alpha=0.3)
    ax_e.set(ylabel="held-out greedy EM (%)", ylim=(-2, 102),
             title="Held-out greedy EM after RL: mean of seeds, 95% CI\n(seeds and questions), dots: each seed")
    ax_e.grid(alpha=0.3, axis="y")
    seeds = len(doc["per_seed"])
    fig.suptitle(f"Learning ({seeds} seeds): `{command(doc, name)}` -> {name}.json", fontsize=10)
    return save(fig, path)


def plot_memory(results: Path, out: Path) -> Path | None:
    doc = load(results, "memory")
    if not doc or not doc.get("results"):
        return None
    rows = [r for r in doc["results"].values() if r.get("kind") == "update"]
    acts = [r for r in doc["results"].values() if r.get("kind") == "activations"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:  # peak RSS against rows, one line per (model, micro-batch, precision, checkpointing)
        label = f"{r.get('model', 'head')} micro {r['micro_batch_size']} {r['precision']}" + \
                (" ckpt" if r.get("gradient_checkpointing") else "")
        series.setdefault(label, []).append((r["rows"], r["peak_rss_mib"] / 1024))
    _lines(axes[0], series, "rows in the update batch", "peak RSS (GiB)", "Peak RSS against batch rows")
    if doc.get("target_gib"):
        axes[0].axhline(doc["target_gib"], color="r", ls="--", lw=1, label=f"target {doc['target_gib']} GiB")
        axes[0].set_ylim(0, doc["target_gib"] * 1.1)
        axes[0].legend(fontsize=7)
    micro: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["rows"] == 8 and not r.get("gradient_checkpointing") and r.get("model", "head") == "head":
            micro.setdefault(f"rows 8 {r['precision']}", []).append((r["micro_batch_size"], r["update_share_mib"] / 1024))
    for r in rows:
        if r.get("model") == "body":
            micro.setdefault("body rows 4 bf16" + (" ckpt" if r.get("gradient_checkpointing") else ""), []).append(
                (r["micro_batch_size"], r["update_share_mib"] / 1024))
    _lines(axes[1], micro, "micro-batch size (rows)", "update's own memory (GiB)",
           "Update memory against micro-batch size")
    act: dict[str, list[tuple[float, float]]] = {}
    for r in acts:
        act.setdefault(r["model"] + (" ckpt" if r.get("gradient_checkpointing") else ""), []).append(
            (r["rows"], r["share_mib"] / 1024))
    _lines(axes[2], act, "rows (1,024 tokens each)", "activation memory (GiB)",
           "Activations, with and without gradient checkpointing")
    setup = doc.get("setup", {})
    fig.suptitle(f"Memory: `{command(doc, 'memory')}` ({setup.get('model', '')}, vocab {setup.get('vocab', '?')}, "
                 f"{setup.get('seq_tokens', '?')} tokens per row), {SHARED}", fontsize=10)
    return save(fig, out / "bench-memory.png")


def _lines(ax: Any, series: dict[str, list[tuple[float, float]]], xlabel: str, ylabel: str, title: str) -> None:
    series = {k: v for k, v in series.items() if len(v) >= 2}  # a curve needs two points
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], "-o", label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=7)


def scaling_panels(results: Path) -> list[tuple[str, dict[str, list[float]], dict[str, float]]]:
    """(title, mode -> per-run seconds per iteration, mode -> median) for each scaling result found."""
    panels = []
    scale = load(results, "scale") or {}
    for section, body in scale.items():
        if isinstance(body, dict) and isinstance(body.get("iteration_s_median"), dict):
            medians = body["iteration_s_median"]
            runs = {m: [r["iteration_s_mean"] for r in rs]
                    for m, rs in body.get("runs", {}).items() if isinstance(rs, list)}
            panels.append((f"scale.json {section}\n`{command(body, 'scale')}`", runs, medians))
    return panels


def plot_scaling(results: Path, out: Path) -> Path | None:
    panels = scaling_panels(results)
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.4), squeeze=False)
    for ax, (title, runs, medians) in zip(axes[0], panels):
        modes = list(medians)
        ax.bar(range(len(modes)), [medians[m] for m in modes], color=[f"C{i}" for i in range(len(modes))], alpha=0.7)
        for i, m in enumerate(modes):  # every repeat, so the spread on a shared machine shows
            ys = runs.get(m, [])
            ax.plot([i] * len(ys), ys, "k.", alpha=0.6)
            ax.annotate(f"{medians[m]:.2f}", (i, medians[m]), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(modes)), [m.replace("_", " ") for m in modes], fontsize=8)
        ax.set(ylabel="seconds per iteration (bar: median, dots: runs)", title=title)
        ax.title.set_fontsize(9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Scaling: seconds per training iteration, {SHARED}")
    return save(fig, out / "bench-scaling.png")


def plot_retrieval(results: Path, out: Path) -> Path | None:
    """Queries/s per backend (retrieval.json) and of the tantivy index under load (retriever_load.json);
    against corpus size: bench-retrieval-scale.png."""
    ret, load_doc = load(results, "retrieval"), load(results, "retriever_load")
    if not ret and not load_doc:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.6))
    bars: list[tuple[str, float]] = []
    for backend in ("tantivy", "elasticsearch", "dense", "dense_hnsw", "hybrid"):
        if isinstance((ret or {}).get(backend), dict) and "queries_per_s" in ret[backend]:
            # the ES figure is against an ES-API stand-in server, not a real cluster: say so
            label = "ES API\nstand-in" if backend == "elasticsearch" else backend.replace("_", "\n")
            bars.append((f"{label}\n1 proc", ret[backend]["queries_per_s"]))
    if load_doc:
        batch = load_doc.get("batch_size", "?")
        bars.append((f"tantivy\nbatch {batch}\n1 proc", load_doc["single_process_reference_qps"]))
        bars.append((f"tantivy\nbatch {batch}\n{load_doc['processes']} procs", load_doc["qps"]))
    ax.bar(range(len(bars)), [b[1] for b in bars], color=[f"C{i}" for i in range(len(bars))])
    for i, (_, v) in enumerate(bars):
        ax.annotate(f"{v:,.0f}" if v >= 10 else f"{v:.1f}", (i, v), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.set_yscale("log")
    docs = (ret or {}).get("n_documents") or (load_doc or {}).get("corpus_docs")
    ax.set(ylabel="queries / s (log)", title=f"Throughput per backend, {docs} documents, k={(ret or {}).get('k', 5)}\n"
           f"`{command(ret or {}, 'retrieval')}`, `{command(load_doc or {}, 'retriever_load')}`")
    ax.title.set_fontsize(9)
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"Retrieval throughput, {SHARED}")
    return save(fig, out / "bench-retrieval.png")


def plot_retrieval_scale(results: Path, out: Path) -> Path | None:
    """Queries/s against passages (one line per query form and process count), build time and size."""
    doc = load(results, "retrieval_scale")
    if not doc or not doc.get("builds"):
        return None
    fig, (ax_q, ax_b) = plt.subplots(1, 2, figsize=(13, 4.6))
    styles = {"entity": "-", "question": "--"}
    for form, style in styles.items():
        by_procs: dict[int, list[tuple[float, float]]] = {}
        for r in doc.get(f"search_{form}_queries", []):
            by_procs.setdefault(r["processes"], []).append((r["passages"], r["qps"]))
        for i, (procs, points) in enumerate(sorted(by_procs.items())):
            points.sort()
            ax_q.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", color=f"C{i}",
                      label=f"{form} queries, {procs} process{'es' if procs > 1 else ''}")
    if doc.get("target_qps_1_process_1M"):
        ax_q.axhline(doc["target_qps_1_process_1M"], color="r", lw=1, ls=":", label="target, 1 process at 1M")
    ax_q.set_xscale("log")
    ax_q.set_yscale("log")
    cfg = doc.get("config", {})
    ax_q.set(xlabel="passages (about 100 words each)", ylabel="queries / s",
             title=f"tantivy batch search, k={cfg.get('k', 5)}, batches of {cfg.get('batch', '?')}")
    ax_q.legend(fontsize=7)
    ax_q.grid(alpha=0.3, which="both")
    builds = sorted(doc["builds"], key=lambda b: b["passages"])
    xs = [b["passages"] for b in builds]
    ax_b.plot(xs, [b["build_s"] for b in builds], "-o", color="C0", label="build (streamed, incl. generation)")
    ax_b.plot(xs, [b["generation_s"] for b in builds], "--o", color="C0", alpha=0.5, label="generation alone")
    ax_b.set(xscale="log", yscale="log", xlabel="passages", ylabel="seconds", title="Index build and size")
    ax_size = ax_b.twinx()
    ax_size.plot(xs, [b["index_mib"] for b in builds], "-s", color="C3", label="index on disk (MiB)")
    ax_size.set(yscale="log", ylabel="MiB on disk")
    lines = ax_b.get_legend_handles_labels()
    more = ax_size.get_legend_handles_labels()
    ax_b.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper left")
    ax_b.grid(alpha=0.3, which="both")
    load_at = doc.get("machine", {}).get("load_average_at_start", "?")
    fig.suptitle(f"Retrieval at scale: `{command(doc, 'retrieval_scale')}`, {SHARED} (load at start {load_at})",
                 fontsize=10)
    return save(fig, out / "bench-retrieval-scale.png")


def save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


PLOTS: dict[str, Callable[[Path, Path], Path | None]] = {
    "learning": plot_learning, "learning_endpoint": plot_learning_endpoint, "memory": plot_memory,
    "scaling": plot_scaling, "retrieval": plot_retrieval, "retrieval_scale": plot_retrieval_scale}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, plot in PLOTS.items():
        path = plot(args.results, args.out)
        print(f"{name}: wrote {path}" if path else f"{name}: skipped (no result file in {args.results})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
