"""`agent-r1 index`, `agent-r1 search`, `agent-r1 retrieval-eval`.

`index` writes DIR/retriever.json for every backend, so `--index DIR` (and the library
call `open_index(DIR)`) reopens tantivy, Elasticsearch, dense and hybrid indexes alike.
`embed` fills the corpus-embedding cache ahead of `index` (the pipeline's embed step).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from agent_r1.retrieval.base import RETRIEVERS, VECTOR_BACKENDS, build_index, check_k, open_index
from agent_r1.retrieval.search import DEFAULT_ES_URL


def _add_dense_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encoder", default=None,
                   help="dense/hybrid: encoder spec, `minilm` (default, offline) or hf:<hub id or folder>")
    p.add_argument("--dense-index", default=None, choices=("flat", "hnsw"),
                   help="embedded dense/hybrid: faiss index type (default flat: exact)")
    p.add_argument("--embed-cache", default=None, type=Path,
                   help="corpus-embedding cache folder (default $AGENT_R1_EMBED_CACHE or ~/.cache/agent-r1/embeddings)")


def dense_options(args: argparse.Namespace) -> dict[str, object]:
    """The dense settings given on the command line, named as SearchConfig's fields (search.encoder, ...)."""
    given = {"encoder": args.encoder, "dense_index": args.dense_index,
             "embed_cache_dir": str(args.embed_cache) if args.embed_cache else None}
    return {k: v for k, v in given.items() if v is not None}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("index", help="build a retrieval index from a corpus JSONL")
    p.add_argument("--corpus", required=True, type=Path, help="corpus.jsonl with {id?, title, text} rows")
    p.add_argument("--backend", default="tantivy", choices=RETRIEVERS.names())
    p.add_argument("--out", required=True, type=Path, help="index directory (gets retriever.json)")
    p.add_argument("--url", default=os.environ.get("AGENT_R1_ES_URL", DEFAULT_ES_URL),
                   help="Elasticsearch URL (default: $AGENT_R1_ES_URL or %(default)s)")
    p.add_argument("--index-name", default="agent-r1-corpus", help="Elasticsearch index name")
    p.add_argument("--overwrite", action="store_true",
                   help="Elasticsearch: replace an existing index of that name even if agent-r1 did not make it "
                        "(without it, only an index agent-r1 made is rebuilt)")
    _add_dense_options(p)
    p.set_defaults(func=cmd_index)

    p = subparsers.add_parser("embed", help="encode a corpus into the embedding cache (before `index` of a "
                                            "dense or hybrid backend; a no-op when cached)")
    p.add_argument("--corpus", required=True, type=Path)
    _add_dense_options(p)
    p.set_defaults(func=cmd_embed)

    p = subparsers.add_parser("search", help="search an index built by `agent-r1 index`")
    p.add_argument("--index", required=True, type=Path, dest="index_dir")
    p.add_argument("query", nargs="+", help="one or more queries (searched as one batch)")
    _trusted_url_arg(p)
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--json", action="store_true", help="print hits as JSON")
    p.set_defaults(func=cmd_search)

    p = subparsers.add_parser("retrieval-eval", help="recall@k of supporting titles for a questions.jsonl")
    p.add_argument("--index", required=True, type=Path, dest="index_dir")
    p.add_argument("--questions", required=True, type=Path, help="questions.jsonl from `agent-r1 prepare`")
    _trusted_url_arg(p)
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_retrieval_eval)


def _trusted_url_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=DEFAULT_ES_URL, dest="trusted_url",
                   help="Elasticsearch: the server you trust with AGENT_R1_ES_* credentials; an index whose "
                        "retriever.json names another one is refused (default: %(default)s)")


def cmd_index(args: argparse.Namespace) -> int:
    extra = dense_options(args)
    if extra and args.backend not in VECTOR_BACKENDS:
        raise ValueError(f"--encoder/--dense-index/--embed-cache apply to {', '.join(VECTOR_BACKENDS)}, "
                         f"not {args.backend!r}")
    start = time.perf_counter()
    n = build_index(args.corpus, args.out, args.backend, url=args.url, index_name=args.index_name,
                    overwrite=args.overwrite, **extra)
    seconds = time.perf_counter() - start
    print(f"indexed {n} documents with {args.backend} into {args.out} in {seconds:.2f}s")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from agent_r1.retrieval.embeddings import embed_corpus

    if args.dense_index:
        raise ValueError("--dense-index is an index setting: give it to `agent-r1 index`")
    start = time.perf_counter()
    path = embed_corpus(args.corpus, args.embed_cache, args.encoder or "minilm")
    print(f"corpus embeddings of {args.corpus} in {path} ({time.perf_counter() - start:.1f}s)")
    return 0


def _check_k(k: int) -> None:
    try:
        check_k(k)
    except ValueError as err:
        raise ValueError(f"-{err}") from None


def cmd_search(args: argparse.Namespace) -> int:
    _check_k(args.k)
    retriever = open_index(args.index_dir, credentials_url=args.trusted_url)
    try:
        results = retriever.search(list(args.query), args.k)
    finally:
        retriever.close()
    if args.json:
        payload = [h.to_dict() for h in results[0]] if len(results) == 1 else \
            [[h.to_dict() for h in hits] for hits in results]
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return 0
    for query, hits in zip(args.query, results):
        print(f"# {query}")
        for rank, h in enumerate(hits, 1):
            print(f"{rank}. [{h.score:.2f}] {h.title}: {h.text[:160]}")
        if not hits:
            print("(no hits)")
    return 0


def cmd_retrieval_eval(args: argparse.Namespace) -> int:
    from agent_r1.data.loaders import load_questions_jsonl
    from agent_r1.retrieval.metrics import recall_at_k

    _check_k(args.k)
    samples = load_questions_jsonl(args.questions)
    retriever = open_index(args.index_dir, credentials_url=args.trusted_url)
    try:
        start = time.perf_counter()
        results = retriever.search([s.question for s in samples], args.k)
        seconds = time.perf_counter() - start
    finally:
        retriever.close()
    recall = recall_at_k(results, [s.supporting_titles for s in samples], args.k)
    if recall.n == 0:
        raise ValueError(f"{args.questions}: no question has supporting_titles, so recall is undefined")
    out = {f"recall@{args.k}_any": recall.any, f"recall@{args.k}_all": recall.all, "n": recall.n,
           "n_skipped": recall.n_skipped, "k": args.k, "search_seconds": round(seconds, 4),
           "queries_per_s": round(len(samples) / seconds, 1) if seconds > 0 else None}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"recall@{args.k} any={recall.any:.3f} all={recall.all:.3f} over n={recall.n} questions "
              f"({len(samples) / max(seconds, 1e-9):.1f} queries/s)")
    return 0
