"""One pooled Elasticsearch client per process, against a real server speaking its REST API (noida-db).

Connections are counted on both ends: the client's urllib3 pools (connections opened, requests sent)
and the server process's own TCP table (psutil), which sees every socket whatever the client says.
noida-db keeps connections alive, so "opened" equals "open at once" for a pooled client; without the
bound, N threads would open N sockets.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from dataclasses import replace
from typing import Any

import psutil
import pytest

from agent_r1.data.corpus import dedup_documents, make_document
from agent_r1.data.io import iter_records
from agent_r1.retrieval.base import SearchConfig, open_retriever
from agent_r1.retrieval.search import COMMAND_TIMEOUT_S
from tests.es_fixture import HOTPOTQA_400, es_server, require_sample  # noqa: F401

N_QUESTIONS = 12
POOL = 3
THREADS = 8
PER_THREAD = 4
K = 3


@pytest.fixture(scope="module")
def hotpot_index(es_server):  # noqa: F811
    """The paragraphs of the first 12 HotpotQA questions, indexed; (config, questions, reference ids)."""
    rows = [rec.value for rec in iter_records(require_sample(HOTPOTQA_400))][:N_QUESTIONS]
    docs = dedup_documents(make_document(title, " ".join(s.strip() for s in sents))
                           for row in rows for title, sents in row["context"])
    config = SearchConfig(backend="elasticsearch", index_dir="", url=es_server.url, index_name="pool-test",
                          retry_backoff_s=0.05, es_pool_size=1, timeout_s=COMMAND_TIMEOUT_S)
    builder = open_retriever(config)
    assert builder.index(docs) == len(docs)
    questions = [row["question"] for row in rows]
    # Sequential reference: one query at a time over a pool of one; it must need exactly one socket.
    reference = [[h.id for h in builder.search([q], K)[0]] for q in questions]
    assert builder.pool_stats()["connections_opened"] == 1
    assert all(len(ids) == K for ids in reference)
    builder.close()
    return config, questions, reference


def server_peers(server) -> set[int]:
    """Client ports of the connections the server holds open now (its own TCP table)."""
    port = int(server.url.rsplit(":", 1)[1])
    return {c.raddr.port for c in psutil.Process(server.proc.pid).net_connections("tcp")
            if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port and c.raddr}


def pool_ports(retriever: Any) -> set[int]:
    """Local ports of the idle sockets in this process's pools (all of them, between requests)."""
    ports = set()
    for node in retriever.client.transport.node_pool.all():
        for conn in list(node.pool.pool.queue):
            if conn is not None and conn.sock is not None:
                ports.add(conn.sock.getsockname()[1])
    return ports


def with_pool(config: SearchConfig, size: int) -> Any:
    return open_retriever(replace(config, es_pool_size=size))


def test_threads_share_a_bounded_pool(es_server, hotpot_index):  # noqa: F811
    config, questions, reference = hotpot_index
    assert server_peers(es_server) == set()  # the builder closed its socket
    retriever = with_pool(config, POOL)
    seen: set[int] = set()
    stop = threading.Event()

    def sample() -> None:  # the server's view while the load runs
        while not stop.is_set():
            seen.update(server_peers(es_server))
            stop.wait(0.02)

    results: dict[int, list[list[str]]] = {}
    start = threading.Barrier(THREADS)

    def load(t: int) -> None:
        start.wait()  # all threads ask at once: more concurrent searches than pooled sockets
        idx = [(t * PER_THREAD + j) % len(questions) for j in range(PER_THREAD)]
        results[t] = [[h.id for h in retriever.search([questions[i]], K)[0]] for i in idx]

    sampler = threading.Thread(target=sample)
    sampler.start()
    workers = [threading.Thread(target=load, args=(t,)) for t in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    sampler.join()
    seen.update(server_peers(es_server))

    for t in range(THREADS):  # every thread got exactly what a sequential client gets
        assert results[t] == [reference[(t * PER_THREAD + j) % len(questions)] for j in range(PER_THREAD)]
    stats = retriever.pool_stats()
    assert stats["requests"] == THREADS * PER_THREAD  # one msearch each, no retries
    assert 2 <= stats["connections_opened"] <= POOL  # shared concurrently, never past the bound
    assert len(seen) == stats["connections_opened"]  # the server saw just those sockets
    assert pool_ports(retriever) == server_peers(es_server)
    retriever.close()
    assert server_peers(es_server) == set()  # close() closes them
    with pytest.raises(RuntimeError, match="closed"):
        retriever.search(["anything"], 1)


def _child(retriever: Any, questions: list[str], conn: Any, search: bool) -> None:
    try:
        if search:
            ids = [[h.id for h in retriever.search([q], K)[0]] for q in questions]
            conn.send({"pid": os.getpid(), "ids": ids, "stats": retriever.pool_stats(),
                       "ports": sorted(pool_ports(retriever))})
        retriever.close()  # a child that never searched must leave the parent's sockets alone
        conn.send({"closed": True})
    except BaseException as err:  # noqa: BLE001 (reported to the parent, which fails the test with it)
        conn.send({"error": f"{type(err).__name__}: {err}"})
    finally:
        conn.close()


@pytest.mark.parametrize("child_searches", [True, False])
def test_forked_child_gets_its_own_pool(es_server, hotpot_index, child_searches):  # noqa: F811
    config, questions, reference = hotpot_index
    retriever = with_pool(config, POOL)
    assert [[h.id for h in hits] for hits in retriever.search(questions[:2], K)] == reference[:2]
    parent_ports = pool_ports(retriever)
    before = retriever.pool_stats()
    assert before["connections_opened"] == 1 and parent_ports == server_peers(es_server)

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(retriever, questions, send, child_searches))
    child.start()
    send.close()
    messages = []
    while True:
        try:
            messages.append(recv.recv())
        except EOFError:
            break
    child.join(timeout=60)
    assert child.exitcode == 0 and not any("error" in m for m in messages), messages
    assert messages[-1] == {"closed": True}
    if child_searches:
        got = messages[0]
        assert got["pid"] == child.pid != os.getpid()
        assert got["ids"] == reference  # the child's queries work and agree with the parent's
        assert got["stats"]["pid"] == child.pid and got["stats"]["requests"] == len(questions)
        assert 1 <= got["stats"]["connections_opened"] <= POOL
        assert got["ports"] and not set(got["ports"]) & parent_ports  # its own sockets, none of the parent's

    # The parent's pool saw none of the child's traffic, and its socket survived the child's exit
    # and close(): the next query reuses it (no new connection).
    assert retriever.pool_stats()["requests"] == before["requests"]
    assert [[h.id for h in hits] for hits in retriever.search(questions, K)] == reference
    after = retriever.pool_stats()
    assert after["connections_opened"] == 1 and pool_ports(retriever) == parent_ports
    retriever.close()


def test_pool_size_must_be_positive():
    with pytest.raises(ValueError, match="es_pool_size must be >= 1"):
        open_retriever(SearchConfig(backend="elasticsearch", url="http://127.0.0.1:1", es_pool_size=0))
