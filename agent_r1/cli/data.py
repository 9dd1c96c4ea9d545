"""`agent-r1 prepare <dataset>`: normalize a QA release into DIR/questions.jsonl (+ corpus.jsonl).

questions.jsonl holds one `QASample.to_dict()` per line; corpus.jsonl holds {id, title, text}
rows when the release ships paragraphs (HotpotQA distractor, official 2Wiki/MuSiQue). Both are
what `agent-r1 index` and training read, whatever the original format was.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agent_r1.schema import limited

MAX_LISTED = 20  # skipped rows printed with their reason; the rest by line number only
HOTPOTQA_DEV_DISTRACTOR_URL = "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json"


def register(subparsers: argparse._SubParsersAction) -> None:
    prepare = subparsers.add_parser("prepare", help="convert a QA dataset to questions.jsonl + corpus.jsonl")
    sub = prepare.add_subparsers(dest="dataset", required=True)

    p = sub.add_parser("hotpotqa", help="HotpotQA (official JSON or JSONL)")
    p.add_argument("--input", type=Path, help="HotpotQA file (or the download target with --download)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--skip-bad", action="store_true", help="skip malformed rows instead of failing")
    p.add_argument("--download", action="store_true",
                   help=f"download the official dev distractor set ({HOTPOTQA_DEV_DISTRACTOR_URL})")
    p.set_defaults(func=cmd_prepare_qa)

    for name, what in (("2wiki", "2WikiMultihopQA"), ("musique", "MuSiQue"), ("bamboogle", "Bamboogle")):
        p = sub.add_parser(name, help=f"{what} (official or questions-only JSON/JSONL)")
        p.add_argument("--input", type=Path, required=True)
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--skip-bad", action="store_true", help="skip malformed rows instead of failing")
        p.set_defaults(func=cmd_prepare_qa, download=False)

    p = sub.add_parser("synthetic", help="generate the offline synthetic world (questions + corpus)")
    p.add_argument("--seed", type=limited("", "seed"), default=0)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_prepare_synthetic)


def download(url: str, dest: Path, timeout: float = 60.0) -> Path:
    """Fetch `url` to `dest` (via a temp file); offline this fails with a clear message."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as fh:
            while block := resp.read(1 << 20):
                fh.write(block)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        tmp.unlink(missing_ok=True)
        raise ValueError(
            f"could not download {url} ({getattr(err, 'reason', err)}); this machine may be offline: "
            f"download it elsewhere and pass it with --input FILE") from None
    tmp.replace(dest)
    return dest


def _corpus(dataset: str, path: Path, skip_bad: bool) -> list[Any] | None:
    from agent_r1.data import corpus

    if not corpus.has_paragraphs(path, skip_bad=skip_bad):
        return None
    if dataset == "musique":
        return corpus.build_corpus_from_musique(path, skip_bad=skip_bad)
    return corpus.build_corpus_from_hotpotqa(path, skip_bad=skip_bad)  # HotpotQA and official 2Wiki share `context`


def cmd_prepare_qa(args: argparse.Namespace) -> int:
    from agent_r1.data.io import write_jsonl
    from agent_r1.data.loaders import LOADERS, LoadReport

    from agent_r1.data.owned import claim_folder

    # questions.jsonl and corpus.jsonl are written by name: only into a folder this dataset's prepare
    # made (or a new or empty one), never over a user's files or another command's output
    out = claim_folder(args.out, "--out", "pass a new or empty folder as --out (or one this same prepare made)",
                       f"agent-r1 prepare {args.dataset}")
    path: Path | None = args.input
    if args.download:
        path = path or args.out / "raw" / "hotpot_dev_distractor_v1.json"
        print(f"downloading {HOTPOTQA_DEV_DISTRACTOR_URL} -> {path}")
        download(HOTPOTQA_DEV_DISTRACTOR_URL, path)
    if path is None:
        raise ValueError("give --input FILE (or --download for the official HotpotQA dev set)")
    report = LoadReport()
    samples = LOADERS[args.dataset](path, skip_bad=args.skip_bad, report=report)
    n_q = write_jsonl(out / "questions.jsonl", samples)
    msg = f"wrote {n_q} questions to {out / 'questions.jsonl'}"
    if report.n_skipped:
        msg += f" (skipped {report.n_skipped} bad rows)"
    docs = _corpus(args.dataset, path, args.skip_bad)
    if docs is not None:
        n_d = write_jsonl(out / "corpus.jsonl", docs)
        msg += f"; {n_d} paragraphs to {out / 'corpus.jsonl'}"
    elif (out / "corpus.jsonl").exists():  # our own earlier output (the folder is ours): never left stale
        (out / "corpus.jsonl").unlink()
        msg += "; removed the corpus.jsonl of an earlier prepare (this input has no paragraphs)"
    print(msg)
    for err in report.skipped[:MAX_LISTED]:  # each skipped row with its file:line and reason
        print(f"  skipped {err}")
    if report.n_skipped > MAX_LISTED:
        print(f"  ... and {report.n_skipped - MAX_LISTED} more (lines {', '.join(str(e.line) for e in report.skipped[MAX_LISTED:])})")
    return 0


def cmd_prepare_synthetic(args: argparse.Namespace) -> int:
    from agent_r1.data.owned import claim_folder
    from agent_r1.data.synthetic import write_synthetic  # another module; imported only when used

    # the world's train/test/corpus files are written over by name: never into a folder of the user's own
    # (an older version's world is recognised by its world.json)
    # (a data.dir that a run generated holds the same world files)
    claim_folder(args.out, "--out", "pass a new or empty folder as --out", "agent-r1 prepare synthetic", ("world.json",),
                 also=("data.dir",))
    summary = write_synthetic(args.seed, args.out)
    print(json.dumps(summary, indent=2, default=str))
    return 0
