"""Arithmetic word problems for the `calculator` tool, generated offline from a seed.

Each row is a `QASample`: the question, the answer as a number string, `plan` = the calculator
expressions a scripted agent types (one per step, intermediate results filled in) and
`env` = the sample's own env config (the calculator tool, the numeric answer metric). Operands
are two- and three-digit, so a small model gains by calling the tool rather than guessing; every
answer is a non-negative integer. Train and test hold no question in common.

    write_arithmetic(seed=0, out_dir=Path("data/arithmetic"))   # or: data.source=arithmetic
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent_r1.data.io import write_jsonl
from agent_r1.data.schema import QASample
from agent_r1.tasks.registry import read_task_manifest, register_data_generator, write_task_manifest

SAMPLE_ENV = {"tools": ["calculator"], "reward": {"metric": "numeric"}}

NAMES = ("Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kemi", "Liam",
         "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara")
ITEMS = ("apples", "pencils", "stamps", "marbles", "books", "cards", "shells", "coins", "stickers", "beads")
BOXES = {"box": "boxes", "crate": "crates", "bag": "bags", "jar": "jars", "shelf": "shelves", "pack": "packs"}
VERSION = 1  # bump when the wording or the draws change, so generated folders are rewritten


@dataclass(frozen=True)
class ArithmeticConfig:
    seed: int = 0
    n_train: int = 2000
    n_test: int = 200
    types: tuple[str, ...] = ("add", "sub", "mul", "div", "mul_add", "mul_sub", "sub_div")


Problem = tuple[str, list[str], int]  # question, calculator plan, answer


def _add(r: random.Random) -> Problem:
    name, item, a, b = r.choice(NAMES), r.choice(ITEMS), r.randint(100, 999), r.randint(100, 999)
    return f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?", [f"{a} + {b}"], a + b


def _sub(r: random.Random) -> Problem:
    name, item = r.choice(NAMES), r.choice(ITEMS)
    a = r.randint(300, 999)
    b = r.randint(100, a - 1)
    return f"{name} had {a} {item} and gave away {b}. How many {item} are left?", [f"{a} - {b}"], a - b


def _mul(r: random.Random) -> Problem:
    item, box, a, b = r.choice(ITEMS), r.choice(list(BOXES)), r.randint(12, 99), r.randint(12, 99)
    return f"A {box} holds {a} {item}. How many {item} are in {b} such {BOXES[box]}?", [f"{a} * {b}"], a * b


def _div(r: random.Random) -> Problem:
    item, b, q = r.choice(ITEMS), r.randint(3, 29), r.randint(12, 99)
    return (f"{b * q} {item} are shared equally among {b} friends. How many {item} does each friend get?",
            [f"{b * q} / {b}"], q)


def _mul_add(r: random.Random) -> Problem:
    name, item, box = r.choice(NAMES), r.choice(ITEMS), r.choice(list(BOXES))
    a, b, c = r.randint(12, 99), r.randint(3, 40), r.randint(10, 99)
    return (f"{name} has {b} {BOXES[box]} of {a} {item} each and {c} loose {item}. How many {item} does {name} "
            "have in total?", [f"{a} * {b}", f"{a * b} + {c}"], a * b + c)


def _mul_sub(r: random.Random) -> Problem:
    name, item, box = r.choice(NAMES), r.choice(ITEMS), r.choice(list(BOXES))
    a, b = r.randint(12, 99), r.randint(3, 40)
    c = r.randint(10, a * b - 1)
    return (f"{name} buys {b} {BOXES[box]} of {a} {item} each and uses {c} of them. How many {item} are left?",
            [f"{a} * {b}", f"{a * b} - {c}"], a * b - c)


def _sub_div(r: random.Random) -> Problem:
    name, k, q, spent = r.choice(NAMES), r.randint(3, 12), r.randint(12, 99), r.randint(10, 400)
    rest = k * q
    return (f"{name} had {rest + spent} dollars, spent {spent}, and split the rest equally among {k} people. "
            "How many dollars did each person get?", [f"{rest + spent} - {spent}", f"{rest} / {k}"], q)


PROBLEM_TYPES: dict[str, Callable[[random.Random], Problem]] = {
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "mul_add": _mul_add, "mul_sub": _mul_sub, "sub_div": _sub_div,
}


def generate_arithmetic(config: ArithmeticConfig = ArithmeticConfig()) -> dict[str, list[QASample]]:
    """{"train": [...], "test": [...]}: distinct questions, types in turn, deterministic from the seed."""
    unknown = sorted(set(config.types) - set(PROBLEM_TYPES))
    if unknown:
        raise ValueError(f"unknown arithmetic problem type(s) {unknown}; known: {sorted(PROBLEM_TYPES)}")
    rng = random.Random(config.seed)
    total, seen, problems = config.n_train + config.n_test, set(), []
    attempts = 0
    while len(problems) < total:
        attempts += 1
        if attempts > 50 * total:
            raise RuntimeError(f"could not draw {total} distinct arithmetic problems")
        kind = config.types[len(problems) % len(config.types)]
        question, plan, answer = PROBLEM_TYPES[kind](rng)
        if question not in seen:
            seen.add(question)
            problems.append((kind, question, plan, answer))
    rng.shuffle(problems)
    splits = {"test": problems[:config.n_test], "train": problems[config.n_test:]}
    return {split: [QASample(id=f"arith-{split}-{i:05d}", question=q, answers=[str(a)], type=kind,
                             source="arithmetic", plan=list(plan), env=json.loads(json.dumps(SAMPLE_ENV)),
                             meta={"expression_steps": len(plan)})
                    for i, (kind, q, plan, a) in enumerate(rows)]
            for split, rows in splits.items()}


CORPUS = [  # tiny: it feeds the local tokenizer and keeps the search index buildable; no tool needs it
    ("calculator", "The calculator evaluates arithmetic: numbers, + - * / // % ** and parentheses. "
                   "Write <calculator>37 * 24</calculator> and read the result, e.g. 888."),
    ("word problems", "Read the problem, write one calculator expression per step, then give the final "
                      "number as <answer>888</answer>."),
]


def _settings(config: ArithmeticConfig) -> dict[str, Any]:
    settings = {k: v for k, v in asdict(config).items() if k != "seed"}
    return json.loads(json.dumps({**settings, "version": VERSION}))


def _is_current(seed: int, out_dir: Path, data_cfg: Any = None) -> bool:
    made = read_task_manifest(out_dir)
    return made == {"source": "arithmetic", "seed": seed, "settings": _settings(ArithmeticConfig(seed=seed))}


@register_data_generator("arithmetic", is_current=_is_current)
def write_arithmetic(seed: int, out_dir: Path, data_cfg: Any = None) -> dict[str, int]:
    """Writes train.jsonl, test.jsonl, corpus.jsonl and task.json to `out_dir`; returns the counts."""
    config = ArithmeticConfig(seed=seed)
    splits = generate_arithmetic(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for split, samples in splits.items():
        write_jsonl(out / f"{split}.jsonl", samples)
    write_jsonl(out / "corpus.jsonl", [{"id": f"calc-{i}", "title": t, "text": x} for i, (t, x) in enumerate(CORPUS)])
    write_task_manifest(out, "arithmetic", seed, _settings(config))
    return {split: len(s) for split, s in splits.items()}
