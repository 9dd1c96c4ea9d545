"""A retriever under concurrent rollout workers: N processes, each opening its own retriever and sending
batches of queries (HotpotQA questions) for a fixed time. Reports queries per second, batch latency,
errors, lost results (a batch must return one result list per query) and results that differ from a
single-process reference run. Writes benchmarks/results/retriever_load.json.

tantivy (default): 4 processes, batches of 64, over the 3,952-paragraph HotpotQA corpus. With
`--backend elasticsearch` it is the multi-node picture instead: 1, 2, 4 worker processes (as Ray rollout
workers, each one client with a bounded connection pool shared by its threads) searching the noida-db
server the tests start (tests/support/noida.py); its figures go under the "elasticsearch_workers" key of
the same file, the tantivy figures stay. `search_load` is also retrieval_scale.py's throughput run.

    python -m benchmarks.retriever_load                 # tantivy: 4 processes x 60 s
    python -m benchmarks.retriever_load --backend elasticsearch --workers 1 2 4 --threads 4 --pool-size 4 \
        --batch 8 --questions 30 --seconds 40
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

from benchmarks.common import machine, pct, result_path, shown
from benchmarks.retrieval import hotpot


def load_worker(index_dir: str, questions: list[str], reference: list[list[str]] | None, worker_id: int,
                threads: int, pool_size: int, batch: int, k: int, seconds: float, barrier: Any, out: Any) -> None:
    """One rollout worker: its own retriever (one client, `pool_size` sockets), warmed up, then searched by
    `threads` threads for `seconds` once every worker is ready."""
    from agent_r1.retrieval.base import open_index

    retriever = open_index(index_dir, es_pool_size=pool_size)
    retriever.search(questions[:batch], k)  # warm: open the searcher or the connections
    latencies: list[float] = []
    errors: list[str] = []
    counts = {"queries": 0, "lost": 0, "mismatched": 0, "empty": 0}
    lock = threading.Lock()
    barrier.wait()  # every worker has opened its retriever before the clock starts
    began = time.perf_counter()

    def loop(t: int) -> None:
        offset = (worker_id * 97 + t * 31) % len(questions)
        while time.perf_counter() < began + seconds:
            idx = [(offset + i) % len(questions) for i in range(batch)]
            offset = (offset + batch) % len(questions)
            t0 = time.perf_counter()
            try:
                results = retriever.search([questions[i] for i in idx], k)
            except Exception as exc:  # noqa: BLE001 (counted, never fatal: the point is to count them)
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
                    counts["mismatched"] += reference is not None and [h.id for h in hits] != reference[i]

    pool = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    wall = time.perf_counter() - began  # past `seconds` by the batches in flight at the deadline
    stats = getattr(retriever, "pool_stats", dict)()
    retriever.close()
    out.put({"worker": worker_id, "pid": os.getpid(), "wall": wall, "latencies": latencies, "errors": errors,
             **counts, "connections_opened": stats.get("connections_opened")})


def server_connections(pid: int, port: int) -> int:
    """Connections the server process holds open to clients now (its own TCP table)."""
    import psutil

    return sum(1 for c in psutil.Process(pid).net_connections("tcp")
               if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port and c.raddr)


def search_load(index_dir: str, questions: list[str], reference: list[list[str]] | None, processes: int,
                batch: int, k: int, seconds: float, threads: int = 1, pool_size: int = 1,
                server: Any = None) -> dict[str, Any]:
    """`processes` fresh interpreters (as Ray starts its workers) searching one index together; the
    server's open connections are sampled meanwhile when it is given. Every worker's figures, summed."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes + 1), ctx.Queue()
    procs = [ctx.Process(target=load_worker, args=(index_dir, questions, reference, w, threads, pool_size, batch,
                                                   k, seconds, barrier, out)) for w in range(processes)]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)
    load_start, peak = os.getloadavg()[0], 0
    deadline = time.perf_counter() + seconds
    while server is not None and time.perf_counter() < deadline:  # the server's view of the sockets
        peak = max(peak, server_connections(server.proc.pid, int(server.url.rsplit(":", 1)[1])))
        time.sleep(0.25)
    parts = [out.get(timeout=seconds + 600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    lat = [x for r in parts for x in r["latencies"]]
    return {"parts": parts, "latencies": lat, "batches": len(lat), "wall": max(r["wall"] for r in parts),
            **{key: sum(r[key] for r in parts) for key in ("queries", "lost", "mismatched", "empty")},
            "errors": sum(len(r["errors"]) for r in parts), "error_samples": [e for r in parts for e in r["errors"]][:5],
            "server_connections_peak": peak if server is not None else None,
            "load_avg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)}}


def ms(latencies: list[float], digits: int, *quantiles: float) -> dict[str, float | None]:
    out = {f"p{round(q * 100)}": round(1000 * pct(latencies, q), digits) for q in quantiles}
    return {**out, "mean": round(1000 * statistics.fmean(latencies), digits) if latencies else None,
            "max": round(1000 * max(latencies), digits) if latencies else None}


def indexed(config: Any, docs: list, questions: list[str], k: int) -> dict[str, Any]:
    """Indexes `docs` under `config`, then one process's results for every question: the reference."""
    from agent_r1.retrieval.base import open_retriever, write_manifest

    single = open_retriever(config)
    t0 = time.perf_counter()
    n = single.index(docs)
    build_s = time.perf_counter() - t0
    write_manifest(config, {"num_docs": n})
    t0 = time.perf_counter()
    reference = [[h.id for h in hits] for hits in single.search(questions, k)]
    single_qps = len(questions) / (time.perf_counter() - t0)
    single.close()
    return {"n": n, "build_s": build_s, "reference": reference, "single_qps": single_qps}


def run_tantivy(args: argparse.Namespace) -> dict[str, Any]:
    from agent_r1.retrieval.base import SearchConfig

    docs, samples = hotpot(args.tantivy_questions)
    questions = [q.question for q in samples]
    with tempfile.TemporaryDirectory(prefix="agent-r1-load-") as tmp:
        ref = indexed(SearchConfig(backend="tantivy", index_dir=tmp), docs, questions, args.k)
        run = search_load(tmp, questions, ref["reference"], args.processes, args.batch, args.k, args.seconds)
    return {
        "machine": {**machine(), "load_avg_1m_at_end": run["load_avg_1m"]["end"]},
        "corpus_docs": ref["n"], "distinct_questions": len(questions), "index_build_seconds": round(ref["build_s"], 2),
        "processes": args.processes, "batch_size": args.batch, "k": args.k, "seconds": args.seconds,
        "batches": run["batches"], "queries": run["queries"], "qps": round(run["queries"] / args.seconds, 1),
        "batch_latency_ms": ms(run["latencies"], 2, 0.5, 0.99), "errors": run["errors"],
        "error_samples": run["error_samples"], "lost_results": run["lost"],
        "results_differing_from_single_process": run["mismatched"], "empty_result_lists": run["empty"],
        "single_process_reference_qps": round(ref["single_qps"], 1),
        "per_worker": [{k: v for k, v in r.items() if k != "latencies"} | {"errors": len(r["errors"])}
                       for r in run["parts"]],
    }


def run_es(args: argparse.Namespace) -> dict[str, Any]:
    """Indexes the paragraphs of the first `args.questions` HotpotQA questions into noida-db and runs each
    worker count against it."""
    import importlib.metadata

    from agent_r1.retrieval.base import SearchConfig
    from agent_r1.retrieval.search import COMMAND_TIMEOUT_S
    from tests.support.noida import start_noida

    docs, samples = hotpot(args.questions)
    questions = [q.question for q in samples]
    with tempfile.TemporaryDirectory(prefix="agent-r1-esload-") as tmp:
        server = start_noida(Path(tmp) / "noida")
        try:
            config = SearchConfig(backend="elasticsearch", index_dir=str(Path(tmp) / "index"), url=server.url,
                                  index_name="agent-r1-load", es_pool_size=1, timeout_s=COMMAND_TIMEOUT_S)
            ref = indexed(config, docs, questions, args.k)
            runs = [search_load(str(config.index_dir), questions, ref["reference"], w, args.batch, args.k,
                                args.seconds, args.threads, args.pool_size, server) for w in args.workers]
        finally:
            server.stop()
    return {
        "server": (f"noida-db {importlib.metadata.version('noida-db')} (speaks the Elasticsearch REST API; "
                   "not a real Elasticsearch: absolute figures say nothing of a cluster)"),
        "machine": machine(), "corpus_docs": ref["n"], "distinct_questions": len(questions),
        "index_build_seconds": round(ref["build_s"], 2), "batch_size": args.batch, "k": args.k,
        "seconds_per_run": args.seconds, "single_client_reference_qps": round(ref["single_qps"], 2),
        "runs": [{"workers": w, "threads_per_worker": args.threads, "pool_size_per_worker": args.pool_size,
                  "batches": r["batches"], "queries": r["queries"], "wall_seconds": round(r["wall"], 1),
                  "qps": round(r["queries"] / r["wall"], 2), "batch_latency_ms": ms(r["latencies"], 1, 0.5, 0.95),
                  "errors": r["errors"], "error_samples": r["error_samples"][:3], "lost": r["lost"],
                  "mismatched": r["mismatched"], "empty": r["empty"],
                  "connections_opened_per_worker": [p["connections_opened"] for p in r["parts"]],
                  "server_connections_peak": r["server_connections_peak"], "load_avg_1m": r["load_avg_1m"]}
                 for w, r in zip(args.workers, runs)],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["tantivy", "elasticsearch"], default="tantivy")
    ap.add_argument("--processes", type=int, default=4, help="tantivy: worker processes")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4],
                    help="elasticsearch: worker process counts, one run each")
    ap.add_argument("--threads", type=int, default=4, help="elasticsearch: searching threads per worker")
    ap.add_argument("--pool-size", type=int, default=4, help="elasticsearch: connections per worker")
    ap.add_argument("--questions", type=int, default=100,
                    help="elasticsearch: corpus = these HotpotQA questions' paragraphs (noida-db is slow)")
    ap.add_argument("--batch", type=int, default=None, help="queries per search call (64 tantivy, 8 elasticsearch)")
    ap.add_argument("--seconds", type=float, default=None, help="per run (60 tantivy, 30 elasticsearch)")
    ap.add_argument("--tantivy-questions", type=int, default=None,
                    help="tantivy: the first N HotpotQA questions and their paragraphs (default: all 400)")
    ap.add_argument("--out", default=str(result_path("retriever_load")))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.k, es = 5, args.backend == "elasticsearch"
    args.batch, args.seconds = args.batch or (8 if es else 64), args.seconds or (30.0 if es else 60.0)
    report = {"elasticsearch_workers": run_es(args)} if es else run_tantivy(args)
    out = Path(args.out)  # the other backend's keys stay
    old = json.loads(out.read_text()) if out.exists() else {}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**old, **report}, indent=1))
    print(f"wrote {shown(out)}")
    runs = report["elasticsearch_workers"]["runs"] if es else [report]
    print(json.dumps([{k: v for k, v in r.items() if k != "per_worker"} for r in runs], indent=1))
    ok = all(r["errors"] == 0 and r.get("lost", r.get("lost_results")) == 0
             and r.get("mismatched", r.get("results_differing_from_single_process")) == 0 for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
