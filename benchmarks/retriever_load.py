"""The tantivy retriever under concurrent rollout workers: N processes, each sending batches of 64
queries (HotpotQA questions) for a fixed time over the 3,952-paragraph HotpotQA corpus. Reports
queries per second, p50/p99 batch latency, errors, lost results (a batch must return one result
list per query) and results that differ from a single-process reference run.
Writes benchmarks/results/retriever_load.json.

    python benchmarks/retriever_load.py                 # 4 processes x 60 s
    python benchmarks/retriever_load.py --seconds 20
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HOTPOT = ROOT.parent / "shared" / "data" / "hotpotqa" / "hotpotqa_dev_distractor_400.jsonl"


def worker(index_dir: str, questions: list[str], reference: list[list[str]], worker_id: int, batch: int,
           k: int, start_at: float, seconds: float) -> dict:
    from agent_r1.retrieval.base import open_index

    retriever = open_index(index_dir)
    latencies, errors, lost, mismatched, empty, queries = [], [], 0, 0, 0, 0
    offset = (worker_id * 97) % len(questions)
    while time.time() < start_at:
        time.sleep(0.001)
    deadline = start_at + seconds
    while time.time() < deadline:
        idx = [(offset + i) % len(questions) for i in range(batch)]
        offset = (offset + batch) % len(questions)
        t0 = time.perf_counter()
        try:
            results = retriever.search([questions[i] for i in idx], k)
        except Exception as exc:  # counted, never fatal: the point is to count them
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        latencies.append(time.perf_counter() - t0)
        queries += batch
        if not isinstance(results, list) or len(results) != batch:
            lost += batch - (len(results) if isinstance(results, list) else 0)
            continue
        for i, hits in zip(idx, results):
            if not hits:
                empty += 1
            if [h.id for h in hits] != reference[i]:
                mismatched += 1
    retriever.close()
    return {"worker": worker_id, "batches": len(latencies), "queries": queries, "latencies": latencies,
            "errors": errors, "lost": lost, "mismatched": mismatched, "empty": empty}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "retriever_load.json"))
    args = ap.parse_args()

    from agent_r1.data.corpus import build_corpus_from_hotpotqa
    from agent_r1.data.loaders import load_hotpotqa
    from agent_r1.retrieval.base import RetrievalConfig, open_index, open_retriever, write_manifest

    docs = build_corpus_from_hotpotqa(HOTPOT)
    questions = [q.question for q in load_hotpotqa(HOTPOT)]
    with tempfile.TemporaryDirectory(prefix="agent-r1-load-") as tmp:
        config = RetrievalConfig(backend="tantivy", index_dir=Path(tmp))
        t0 = time.perf_counter()
        n = open_retriever(config).index(docs)
        write_manifest(config, {"num_docs": n})
        build_s = time.perf_counter() - t0
        single = open_index(tmp)
        t0 = time.perf_counter()
        reference = [[h.id for h in hits] for hits in single.search(questions, args.k)]
        single_qps = len(questions) / (time.perf_counter() - t0)
        single.close()

        ctx = mp.get_context("spawn")
        start_at = time.time() + 8.0  # every worker has opened its index before the clock starts
        with ctx.Pool(args.processes) as pool:
            jobs = [pool.apply_async(worker, (tmp, questions, reference, w, args.batch, args.k, start_at,
                                              args.seconds)) for w in range(args.processes)]
            results = [j.get(timeout=args.seconds + 300) for j in jobs]

    latencies = [x for r in results for x in r["latencies"]]
    queries = sum(r["queries"] for r in results)
    report = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "corpus_docs": n, "distinct_questions": len(questions), "index_build_seconds": round(build_s, 2),
        "processes": args.processes, "batch_size": args.batch, "k": args.k, "seconds": args.seconds,
        "batches": len(latencies), "queries": queries,
        "qps": round(queries / args.seconds, 1),
        "batch_latency_ms": {"p50": round(1000 * pct(latencies, 0.5), 2), "p99": round(1000 * pct(latencies, 0.99), 2),
                             "mean": round(1000 * statistics.fmean(latencies), 2) if latencies else None,
                             "max": round(1000 * max(latencies), 2) if latencies else None},
        "errors": sum(len(r["errors"]) for r in results),
        "error_samples": [e for r in results for e in r["errors"]][:5],
        "lost_results": sum(r["lost"] for r in results),
        "results_differing_from_single_process": sum(r["mismatched"] for r in results),
        "empty_result_lists": sum(r["empty"] for r in results),
        "single_process_reference_qps": round(single_qps, 1),
        "per_worker": [{k: v for k, v in r.items() if k != "latencies"} | {"errors": len(r["errors"])}
                       for r in results],
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "per_worker"}, indent=1))
    ok = report["errors"] == 0 and report["lost_results"] == 0 and report["results_differing_from_single_process"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
