"""A synthetic multi-hop world: the project's offline default data.

Invented people, cities, countries and landmarks, one short document per entity, and
HotpotQA-style questions over them:

- one_hop:    "Where was NAME born?"                    -> CITY     plan [NAME]
- bridge:     "In which country was NAME born?"         -> COUNTRY  plan [NAME, CITY]
- comparison: "Who was born first, NAME1 or NAME2?"     -> NAME     plan [NAME1, NAME2]

People are split into disjoint train/dev/test sets (cities and countries are shared), and
dev/test names are new combinations of syllables seen in train names, so answering needs
search and copying, not memory. Each plan query is an entity name that is also the title
of its document, so BM25 over title+text retrieves that document top-1.
Everything is drawn from `random.Random(config.seed)`: the same seed gives identical files.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_r1.data.io import write_jsonl
from agent_r1.data.schema import Document, QASample
from agent_r1.data.synthetic_names import (
    KNOWN_FOR,
    LANDMARK_KINDS,
    NameGenerator,
    SyllablePools,
)

QUESTION_TYPES: tuple[str, ...] = ("one_hop", "bridge", "comparison")
SPLITS: tuple[str, ...] = ("train", "dev", "test")
SOURCE = "synthetic"
# Words of the templates; no invented name may equal one of them.
TEMPLATE_WORDS = ("was", "born", "in", "is", "a", "city", "country", "known", "for", "its",
                  "capital", "where", "which", "who", "first", "or") + KNOWN_FOR + LANDMARK_KINDS


@dataclass(frozen=True)
class SyntheticConfig:
    """Size and shape of the world.

    `split` gives the people per split, either as fractions (train takes the remainder after
    rounding dev and test) or as three integer counts summing to `n_people`.
    `test_only_types` are question types generated for the test split only (out-of-domain).
    """

    seed: int = 0
    n_people: int = 450
    n_cities: int = 40
    n_countries: int = 10
    n_landmarks: int = 40
    split: tuple[float, float, float] | tuple[int, int, int] = (2 / 3, 1 / 9, 2 / 9)
    question_types: tuple[str, ...] = QUESTION_TYPES
    test_only_types: tuple[str, ...] = ()
    comparisons_per_person: int = 1
    year_range: tuple[int, int] = (1800, 1999)

    def __post_init__(self) -> None:
        unknown = set(self.question_types) - set(QUESTION_TYPES)
        if unknown:
            raise ValueError(f"unknown question type(s) {sorted(unknown)}; use {QUESTION_TYPES}")
        stray = set(self.test_only_types) - set(self.question_types)
        if stray:
            raise ValueError(f"test_only_types {sorted(stray)} not in question_types")
        if self.n_countries < 1 or self.n_cities < self.n_countries:
            raise ValueError(f"need 1 <= n_countries <= n_cities, got "
                             f"{self.n_countries} countries, {self.n_cities} cities")
        if self.year_range[0] >= self.year_range[1]:
            raise ValueError(f"year_range must be (low, high) with low < high: {self.year_range}")
        split_counts(self.n_people, self.split)  # validates the split

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split_counts(n_people: int, split) -> dict[str, int]:
    """People per split from fractions or counts; raises a ValueError a user can act on."""
    if len(split) != 3:
        raise ValueError(f"split needs 3 entries (train, dev, test), got {split!r}")
    if all(isinstance(x, int) for x in split):
        if sum(split) != n_people:
            raise ValueError(f"split counts {split} sum to {sum(split)}, not n_people={n_people}")
        counts = list(split)
    else:
        if any(x < 0 for x in split) or abs(sum(split) - 1.0) > 1e-6:
            raise ValueError(f"split fractions {split} must be non-negative and sum to 1")
        dev, test = round(n_people * split[1]), round(n_people * split[2])
        counts = [n_people - dev - test, dev, test]
    if counts[0] < 1:
        raise ValueError(f"split {split} of {n_people} people leaves no train people")
    return dict(zip(SPLITS, counts))


@dataclass
class SyntheticWorld:
    """The corpus, the questions per split, and the ground-truth tables behind them."""

    config: SyntheticConfig
    documents: list[Document]
    splits: dict[str, list[QASample]]
    people: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> city, year, split
    cities: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> country, known_for

    def questions(self) -> list[QASample]:
        return [q for s in SPLITS for q in self.splits.get(s, [])]


def _person_text(name: str, city: str, year: int) -> str:
    return f"{name} was born in {city}. {name} was born in {year}."


def _questions_for(
    people: list[str], split: str, types: tuple[str, ...], world: SyntheticWorld,
    rng: random.Random, comparisons_per_person: int,
) -> list[QASample]:
    people_table, cities = world.people, world.cities
    out: list[QASample] = []

    def add(question, answer, plan, qtype, **meta):
        out.append(QASample(id="", question=question, answers=[answer], supporting_titles=list(plan),
                            type=qtype, source=SOURCE, plan=list(plan),
                            meta={"split": split, "hops": len(plan), **meta}))

    used_pairs: set[frozenset[str]] = set()
    for name in people:
        city = people_table[name]["city"]
        if "one_hop" in types:
            add(f"Where was {name} born?", city, [name], "one_hop", person=name)
        if "bridge" in types:
            country = cities[city]["country"]
            add(f"In which country was {name} born?", country, [name, city], "bridge",
                person=name, city=city)
        if "comparison" in types:
            year = people_table[name]["year"]
            partners = [p for p in people if people_table[p]["year"] != year
                        and frozenset((name, p)) not in used_pairs]
            for other in rng.sample(partners, min(comparisons_per_person, len(partners))):
                used_pairs.add(frozenset((name, other)))
                a, b = (name, other) if rng.random() < 0.5 else (other, name)
                years = {a: people_table[a]["year"], b: people_table[b]["year"]}
                add(f"Who was born first, {a} or {b}?", min(years, key=years.get), [a, b],
                    "comparison", years=years)
    rng.shuffle(out)  # mixed types in file order, so the first N rows are a fair sample
    for i, q in enumerate(out):
        q.id = f"syn-{split}-{i:05d}"
    return out


def generate_world(config: SyntheticConfig | None = None) -> SyntheticWorld:
    """Build the world for `config` (default `SyntheticConfig()`); pure function of the config."""
    config = config or SyntheticConfig()
    rng = random.Random(config.seed)
    names = NameGenerator(rng, reserved=TEMPLATE_WORDS)
    full = SyllablePools.full()
    counts = split_counts(config.n_people, config.split)

    countries = names.draw_many(config.n_countries, full)
    city_names = names.draw_many(config.n_cities, full)
    landmark_names = names.draw_many(config.n_landmarks, full)
    train_people = names.draw_many(counts["train"], full)
    # Dev/test names reuse only syllables seen (in the same position) in train names.
    seen = SyllablePools.seen_in(train_people)
    held_out = {s: names.draw_many(counts[s], seen) for s in ("dev", "test")}
    split_people = {"train": train_people, **held_out}

    # Every country gets at least one city; the rest are spread at random.
    city_country = countries + [rng.choice(countries) for _ in range(config.n_cities - len(countries))]
    rng.shuffle(city_country)
    cities = {c: {"country": k, "known_for": rng.choice(KNOWN_FOR)}
              for c, k in zip(city_names, city_country)}
    capitals = {k: next(c for c in city_names if cities[c]["country"] == k) for k in countries}

    lo, hi = config.year_range
    people: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        for name in split_people[split]:
            people[name] = {"city": rng.choice(city_names), "year": rng.randint(lo, hi), "split": split}
    person_order = list(people)
    rng.shuffle(person_order)  # doc ids must not reveal the split

    documents = [Document(f"person-{i:04d}", n, _person_text(n, people[n]["city"], people[n]["year"]))
                 for i, n in enumerate(person_order)]
    documents += [Document(f"city-{i:03d}", c,
                           f"{c} is a city in {cities[c]['country']}. "
                           f"{c} is known for its {cities[c]['known_for']}.")
                  for i, c in enumerate(city_names)]
    documents += [Document(f"country-{i:03d}", k, f"{k} is a country. Its capital is {capitals[k]}.")
                  for i, k in enumerate(countries)]
    documents += [Document(f"landmark-{i:03d}", m,
                           f"{m} is a {rng.choice(LANDMARK_KINDS)} in {rng.choice(city_names)}.")
                  for i, m in enumerate(landmark_names)]

    world = SyntheticWorld(config=config, documents=documents, splits={}, people=people, cities=cities)
    for split in SPLITS:
        types = tuple(t for t in config.question_types
                      if split == "test" or t not in config.test_only_types)
        world.splits[split] = _questions_for(split_people[split], split, types, world, rng,
                                             config.comparisons_per_person)
    return world


def world_counts(world: SyntheticWorld) -> dict[str, Any]:
    """Documents, questions per split, and questions per split and type."""
    by_type = {s: {t: sum(q.type == t for q in qs) for t in world.config.question_types}
               for s, qs in world.splits.items()}
    return {
        "documents": len(world.documents),
        "people": {s: sum(p["split"] == s for p in world.people.values()) for s in SPLITS},
        "cities": len(world.cities),
        "questions": {s: len(qs) for s, qs in world.splits.items()},
        "questions_total": sum(len(qs) for qs in world.splits.values()),
        "by_type": by_type,
    }


def write_synthetic(seed: int, out_dir: Path, config: SyntheticConfig | None = None) -> dict[str, Any]:
    """Write corpus.jsonl, questions.jsonl (all splits) and {train,dev,test}.jsonl to `out_dir`.

    `seed` overrides `config.seed`. Also writes world.json (config and counts). Returns the counts.
    """
    config = replace(config or SyntheticConfig(), seed=seed)
    world = generate_world(config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(out_dir / "corpus.jsonl", world.documents)
    write_jsonl(out_dir / "questions.jsonl", world.questions())
    for split, qs in world.splits.items():
        write_jsonl(out_dir / f"{split}.jsonl", qs)
    counts = world_counts(world)
    summary = {"config": config.to_dict(), "counts": counts}
    (out_dir / "world.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the synthetic multi-hop world.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-people", type=int, default=SyntheticConfig.n_people)
    parser.add_argument("--test-only-types", nargs="*", default=[])
    args = parser.parse_args(argv)
    config = SyntheticConfig(n_people=args.n_people, test_only_types=tuple(args.test_only_types))
    print(json.dumps(write_synthetic(args.seed, args.out, config), indent=2))


if __name__ == "__main__":
    main()
