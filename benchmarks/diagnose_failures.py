"""Why does a policy miss held-out questions? Classifies every wrong greedy answer of a checkpoint.

For each held-out question of the synthetic world the episode is rolled out greedily and a wrong
answer is put in the first class that fits, in this order:

- never_answered:   no answer (a turn or token budget ended the episode, or no answer tag)
- no_search:        answered without any search
- misspelled_query: a search was made, but no query holds the question's name exactly
                    (a one-letter slip in an unseen name finds another person, or nothing)
- support_missed:   the name was searched for correctly, yet a supporting document never came back
                    (bridge questions: the city's document was never searched for, or misspelled)
- wrong_document:   the answer is copied from a retrieved document that is not a support (another
                    person's city or another city's country)
- miscopied:        every support was retrieved, the answer is within 2 edits of the gold answer
- other:            every support was retrieved and the answer is something else (memory or a guess)

    python -m benchmarks.diagnose_failures --run RUN_DIR [--model CHECKPOINT] [--split test] [--n 300]

Writes benchmarks/results/diagnosis[_<tag>].json: the share of each class among the failures,
the same split by question type, and ten examples per class.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from agent_r1.config import load_config
from agent_r1.evaluation.agent_eval import BUDGET_STOPS
from agent_r1.models.build import load_model
from agent_r1.rewards.qa import exact_match, normalize_answer
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import TransformersEngine
from agent_r1.rollout.loop import run_rollout
from agent_r1.runs.assembly import set_threads
from agent_r1.runs.run import Run
from benchmarks.common import result_path, shown, write_json

CLASSES = ("never_answered", "no_search", "misspelled_query", "support_missed", "wrong_document",
           "miscopied", "other")


def edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def queries(tr) -> list[str]:
    return [str(c.get("arguments", {}).get("query", "")) for t in tr.turns for c in t.info.get("calls", [])]


def misspelled(tr) -> bool:
    """A search was made and none of its queries holds the question's (first) name exactly."""
    qs = queries(tr)
    return bool(qs) and not any(tr.sample["plan"][0].lower() in q.lower().split() for q in qs)


def classify(tr, corpus: dict[str, str]) -> str:
    """The failure class of a wrong episode (see the module docstring)."""
    sample = tr.sample
    gold = sample["answers"][0]
    if tr.answer is None or tr.stop_reason in BUDGET_STOPS:
        return "never_answered"
    qs = queries(tr)
    if not qs:
        return "no_search"
    if misspelled(tr):
        return "misspelled_query"
    found = {t for turn in tr.turns for t in turn.info.get("retrieved_titles", [])}
    supports = set(sample.get("supporting_titles") or [])
    if not supports <= found:
        return "support_missed"
    answer = normalize_answer(tr.answer)
    others = found - supports
    if any(answer and answer in normalize_answer(corpus.get(t, "")).split() for t in others):
        return "wrong_document"
    if edit_distance(answer, normalize_answer(gold)) <= 2:
        return "miscopied"
    return "other"


def example(tr) -> dict:
    return {"question": tr.sample["question"], "gold": tr.sample["answers"][0], "answer": tr.answer,
            "queries": queries(tr), "stop": tr.stop_reason,
            "actions": [t.action_text for t in tr.turns]}


def diagnose(trajs, corpus: dict[str, str]) -> dict:
    by_class: dict[str, list] = defaultdict(list)
    by_type: dict[str, Counter] = defaultdict(Counter)
    right = 0
    for tr in trajs:
        if exact_match(tr.answer or "", tr.sample["answers"]):
            right += 1
            continue
        cls = classify(tr, corpus)
        by_class[cls].append(tr)
        by_type[tr.sample.get("type", "?")][cls] += 1
    wrong = len(trajs) - right
    failed = [tr for trs in by_class.values() for tr in trs]
    searched = [tr for tr in trajs if queries(tr)]
    return {
        # across classes: a misspelled first search also starts most never-answered episodes
        "failures_misspelling_any_query": sum(misspelled(tr) for tr in failed),
        "searched_episodes": len(searched),
        "searched_episodes_misspelled": sum(misspelled(tr) for tr in searched),
        "n": len(trajs), "em": 100.0 * right / max(len(trajs), 1), "failures": wrong,
        "share_of_failures": {c: round(100.0 * len(by_class[c]) / max(wrong, 1), 1) for c in CLASSES},
        "by_type": {t: dict(c) for t, c in sorted(by_type.items())},
        "examples": {c: [example(tr) for tr in by_class[c][:10]] for c in CLASSES if by_class[c]},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="a run folder (its config.json is used)")
    ap.add_argument("--model", default=None, help="a model folder or checkpoint (default: the run's last)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--tag", default="")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    from agent_r1.config import parse_overrides
    run = Path(args.run)
    cfg = load_config(run / "config.json", parse_overrides(args.set))
    model_dir = Path(args.model) if args.model else sorted((run / "checkpoints").glob("iter_*"))[-1]
    set_threads(cfg.train.threads)
    from dataclasses import replace
    rollout = replace(cfg.rollout, n_samples=1)
    with Run(cfg) as parts:  # the run's data, index, retriever and env factory (the retriever closed at the end)
        samples = parts.samples(args.split, args.n)
        corpus = {d["title"]: d["text"] for d in map(json.loads, (parts.data_dir / "corpus.jsonl").open())}
        model, tok = load_model(model_dir)
        trajs = []
        for i in range(0, len(samples), 64):
            trajs += run_rollout(TransformersEngine(model, tok), ChatCodec(tok), parts.env_factory,
                                 samples[i:i + 64], rollout, cfg.reward, seed=cfg.seed + i, greedy=True)
    result = {"model": shown(model_dir), "split": args.split, **diagnose(trajs, corpus)}
    write_json(result_path(f"diagnosis{'_' + args.tag if args.tag else ''}"), result)
    print(json.dumps({k: v for k, v in result.items() if k != "examples"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
