"""The tantivy retriever under concurrent rollout workers: N processes, each sending batches of 64
queries (HotpotQA questions) for a fixed time over the 3,952-paragraph HotpotQA corpus. Reports
queries per second, p50/p99 batch latency, errors, lost results (a batch must return one result
list per query) and results that differ from a single-process reference run.
Writes benchmarks/results/retriever_load.json.

With `--backend elasticsearch` it is the multi-node picture instead: 1, 2, 4 worker processes (as
Ray rollout workers, each opening its own retriever: one client, a bounded connection pool shared by
its threads) searching one Elasticsearch-API server, the noida-db server the tests start
(tests/es_fixture.py), or a real cluster with `--url`. Figures go under the "elasticsearch_workers"
key of the same file; the tantivy figures stay.

    python -m benchmarks.retriever_load                 # tantivy: 4 processes x 60 s
    python -m benchmarks.retriever_load --seconds 20
    python -m benchmarks.retriever_load --backend elasticsearch --workers 1 2 4 --seconds 30
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, machine, pct, result_path, shown
from benchmarks.retrieval import hotpot

HOTPOT = ROOT / "samples" / "hotpotqa" / "hotpotqa_dev_distractor_400.jsonl"  # tracked in the repo


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


def write_merged(path: str, update: dict) -> None:
    """Writes `update` into the JSON at `path`, keeping the keys it does not set (the other backend's)."""
    out = Path(path)
    old = json.loads(out.read_text()) if out.exists() else {}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**old, **update}, indent=1))
    print(f"wrote {shown(out)}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["tantivy", "elasticsearch"], default="tantivy")
    ap.add_argument("--processes", type=int, default=4, help="tantivy: worker processes")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4],
                    help="elasticsearch: worker process counts, one run each")
    ap.add_argument("--threads", type=int, default=4, help="elasticsearch: searching threads per worker")
    ap.add_argument("--pool-size", type=int, default=4, help="elasticsearch: connections per worker")
    ap.add_argument("--questions", type=int, default=100,
                    help="elasticsearch: corpus = these HotpotQA questions' paragraphs (noida-db is slow)")
    ap.add_argument("--url", default="", help="elasticsearch: a running cluster (default: start noida-db)")
    ap.add_argument("--note", default="", help="elasticsearch: written with the figures (e.g. a shared machine)")
    ap.add_argument("--batch", type=int, default=None, help="queries per search call (64 tantivy, 8 elasticsearch)")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=None, help="per run (60 tantivy, 30 elasticsearch)")
    ap.add_argument("--start-delay", type=float, default=8.0,
                    help="tantivy: seconds every worker gets to open its index before the clock starts")
    ap.add_argument("--tantivy-questions", type=int, default=None,
                    help="tantivy: the first N HotpotQA questions and their paragraphs (default: all 400)")
    ap.add_argument("--out", default=str(result_path("retriever_load")))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.backend == "elasticsearch":
        args.batch, args.seconds = args.batch or 8, args.seconds or 30.0
        report = run_es(args, HOTPOT)
        write_merged(args.out, {"elasticsearch_workers": report})
        print(json.dumps(report, indent=1))
        return 0 if all(r["errors"] == 0 and r["mismatched"] == 0 and r["lost"] == 0 for r in report["runs"]) else 1
    args.batch, args.seconds = args.batch or 64, args.seconds or 60.0
    report = run_tantivy(args)
    write_merged(args.out, report)
    print(json.dumps({k: v for k, v in report.items() if k != "per_worker"}, indent=1))
    ok = report["errors"] == 0 and report["lost_results"] == 0 and report["results_differing_from_single_process"] == 0
    return 0 if ok else 1


def run_tantivy(args: argparse.Namespace) -> dict[str, Any]:
    """One index, `args.processes` worker processes searching it for `args.seconds`, checked against
    one process's results."""
    from agent_r1.retrieval.base import SearchConfig, open_index, open_retriever, write_manifest

    docs, samples = hotpot(args.tantivy_questions)
    questions = [q.question for q in samples]
    with tempfile.TemporaryDirectory(prefix="agent-r1-load-") as tmp:
        config = SearchConfig(backend="tantivy", index_dir=tmp)
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
        start_at = time.time() + args.start_delay  # every worker has opened its index before the clock starts
        with ctx.Pool(args.processes) as pool:
            jobs = [pool.apply_async(worker, (tmp, questions, reference, w, args.batch, args.k, start_at,
                                              args.seconds)) for w in range(args.processes)]
            results = [j.get(timeout=args.seconds + 300) for j in jobs]
    return tantivy_report(args, results, n, len(questions), build_s, single_qps)


def tantivy_report(args: argparse.Namespace, results: list[dict], n: int, n_questions: int, build_s: float,
                   single_qps: float) -> dict[str, Any]:
    latencies = [x for r in results for x in r["latencies"]]
    queries = sum(r["queries"] for r in results)
    return {
        "machine": {**machine(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "corpus_docs": n, "distinct_questions": n_questions, "index_build_seconds": round(build_s, 2),
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

def es_worker(index_dir: str, questions: list[str], reference: list[list[str]], worker_id: int, threads: int,
              pool_size: int, batch: int, k: int, seconds: float, barrier: Any, out: Any) -> None:
    """One rollout worker: its own retriever (one client, `pool_size` sockets) searched by `threads` threads."""
    from agent_r1.retrieval.base import open_index

    retriever = open_index(index_dir, es_pool_size=pool_size)
    latencies: list[float] = []
    errors: list[str] = []
    counts = {"queries": 0, "lost": 0, "mismatched": 0, "empty": 0}
    lock = threading.Lock()
    barrier.wait()  # every worker has opened its client before the clock starts
    began = time.perf_counter()
    deadline = began + seconds

    def loop(t: int) -> None:
        offset = (worker_id * 97 + t * 31) % len(questions)
        while time.perf_counter() < deadline:
            idx = [(offset + i) % len(questions) for i in range(batch)]
            offset = (offset + batch) % len(questions)
            t0 = time.perf_counter()
            try:
                results = retriever.search([questions[i] for i in idx], k)
            except Exception as exc:  # noqa: BLE001 (counted, never fatal)
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            took = time.perf_counter() - t0
            with lock:
                latencies.append(took)
                counts["queries"] += batch
                counts["lost"] += batch - len(results)
                for i, hits in zip(idx, results):
                    counts["empty"] += not hits
                    counts["mismatched"] += [h.id for h in hits] != reference[i]

    pool = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    wall = time.perf_counter() - began  # past `seconds` by the batches in flight at the deadline
    stats = retriever.pool_stats()
    retriever.close()
    out.put({"worker": worker_id, "pid": os.getpid(), "wall": wall, "latencies": latencies, "errors": errors, **counts,
             "connections_opened": stats["connections_opened"], "requests": stats["requests"]})


def server_connections(pid: int, port: int) -> int:
    """Connections the server process holds open to clients now (its own TCP table)."""
    import psutil

    return sum(1 for c in psutil.Process(pid).net_connections("tcp")
               if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port and c.raddr)


def es_run(index_dir: str, questions: list[str], reference: list[list[str]], workers: int, args: Any,
           server: Any) -> dict:
    ctx = mp.get_context("spawn")  # a fresh interpreter per worker, as Ray starts its workers
    barrier, out = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=es_worker, args=(index_dir, questions, reference, w, args.threads, args.pool_size,
                                                 args.batch, args.k, args.seconds, barrier, out))
             for w in range(workers)]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)
    load_start = os.getloadavg()[0]
    peak = 0
    deadline = time.perf_counter() + args.seconds
    while server is not None and time.perf_counter() < deadline:  # the server's view of the sockets
        peak = max(peak, server_connections(server.proc.pid, int(server.url.rsplit(":", 1)[1])))
        time.sleep(0.25)
    results = [out.get(timeout=args.seconds + 600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    lat = [x for r in results for x in r["latencies"]]
    queries = sum(r["queries"] for r in results)
    wall = max(r["wall"] for r in results)
    return {
        "workers": workers, "threads_per_worker": args.threads, "pool_size_per_worker": args.pool_size,
        "batches": len(lat), "queries": queries, "wall_seconds": round(wall, 1), "qps": round(queries / wall, 2),
        "batch_latency_ms": {"p50": round(1000 * pct(lat, 0.5), 1), "p95": round(1000 * pct(lat, 0.95), 1),
                             "mean": round(1000 * statistics.fmean(lat), 1) if lat else None,
                             "max": round(1000 * max(lat), 1) if lat else None},
        "errors": sum(len(r["errors"]) for r in results), "error_samples": [e for r in results for e in r["errors"]][:3],
        "lost": sum(r["lost"] for r in results), "mismatched": sum(r["mismatched"] for r in results),
        "empty": sum(r["empty"] for r in results),
        "connections_opened_per_worker": [r["connections_opened"] for r in results],
        "server_connections_peak": peak if server is not None else None,
        "load_avg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
    }


def run_es(args: Any, hotpot: Path) -> dict:
    """Indexes the paragraphs of the first `args.questions` HotpotQA questions and runs each worker count."""
    import importlib.metadata

    from agent_r1.data.corpus import dedup_documents, make_document
    from agent_r1.data.io import iter_records
    from agent_r1.retrieval.base import SearchConfig, open_retriever, write_manifest
    from agent_r1.retrieval.search import COMMAND_TIMEOUT_S

    rows = [rec.value for rec in iter_records(hotpot)][:args.questions]
    docs = dedup_documents(make_document(title, " ".join(x.strip() for x in sents))
                           for row in rows for title, sents in row["context"])
    questions = [row["question"] for row in rows]
    with tempfile.TemporaryDirectory(prefix="agent-r1-esload-") as tmp:
        server = None
        if not args.url:
            from tests.support.noida import start_noida

            server = start_noida(Path(tmp) / "noida")
        try:
            config = SearchConfig(backend="elasticsearch", index_dir=str(Path(tmp) / "index"),
                                  url=args.url or server.url, index_name="agent-r1-load", es_pool_size=1,
                                  timeout_s=COMMAND_TIMEOUT_S)
            single = open_retriever(config)
            t0 = time.perf_counter()
            n = single.index(docs)
            build_s = time.perf_counter() - t0
            write_manifest(config, {"num_docs": n})
            t0 = time.perf_counter()
            reference = [[h.id for h in hits] for hits in single.search(questions, args.k)]
            single_qps = len(questions) / (time.perf_counter() - t0)
            single.close()
            runs = [es_run(str(config.index_dir), questions, reference, w, args, server) for w in args.workers]
        finally:
            if server is not None:
                server.stop()
    return {
        "server": (f"noida-db {importlib.metadata.version('noida-db')} (speaks the Elasticsearch REST API; "
                   "not a real Elasticsearch: absolute figures say nothing of a cluster)") if server else args.url,
        "machine": machine(),
        "note": args.note, "corpus_docs": n, "distinct_questions": len(questions), "index_build_seconds": round(build_s, 2),
        "batch_size": args.batch, "k": args.k, "seconds_per_run": args.seconds,
        "single_client_reference_qps": round(single_qps, 2), "runs": runs,
    }


if __name__ == "__main__":
    sys.exit(main())
