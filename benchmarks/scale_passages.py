"""Generated passages for the retrieval scale benchmark (benchmarks/retrieval_scale.py).

Passages look like the project's synthetic world (agent_r1/data/synthetic.py): each is about one
invented entity, titled by its name, and mentions other entities by name, places, years and a
fixed English vocabulary. They are longer (about 100 words, like a Wikipedia passage of the
paper's 21M-passage corpus) and far more numerous than the synthetic world's documents.

Names use the world's syllable inventory (agent_r1/data/synthetic_names.py) but with 4 syllables:
the world's 2-3 syllable names give only 76,500 distinct names, 4 give 3.75M. Passage `i` is titled
`passage_name(i)`, a bijection of `i` (scrambled so that neighbours do not share prefixes), so a
query's gold title is known without storing the corpus, and a name is one unique token for the
`en_stem` analyzer (final syllables end in a, o or u, which the English stemmer leaves alone).

Passages are a stream (`iter_passages`), drawn from one `random.Random(seed)`: the same
(seed, count) gives the same passages, and nothing is held in memory but the current one.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from agent_r1.data.schema import Document
from agent_r1.data.synthetic_names import FINAL_SYLLABLES, KNOWN_FOR, LANDMARK_KINDS, SYLLABLES

_FIRST = tuple(s.capitalize() for s in SYLLABLES)
NAME_SPACE = len(SYLLABLES) ** 3 * len(FINAL_SYLLABLES)  # 4-syllable names: 3,750,000
_SCRAMBLE = 1_000_003  # a prime not dividing NAME_SPACE, so i -> i * _SCRAMBLE + offset is a bijection
assert NAME_SPACE % _SCRAMBLE != 0

KINDS = ("person", "person", "person", "city", "landmark")  # people are most of the world
JOBS = ("farmer", "painter", "sailor", "teacher", "merchant", "engineer", "poet", "judge", "weaver", "doctor")
FIELDS = ("law", "music", "astronomy", "medicine", "history", "botany", "architecture", "trade", "poetry")
EVENTS = ("flood", "drought", "fair", "election", "strike", "council", "harvest", "famine", "treaty")
WORDS_TARGET = (90, 110)  # a passage is closed by the sentence that takes it to at least 90 words


@dataclass(frozen=True)
class PassageConfig:
    """How many passages and from which seed; `words_min` is where a passage stops growing."""

    passages: int
    seed: int = 0
    words_min: int = WORDS_TARGET[0]

    def __post_init__(self) -> None:
        if not 1 <= self.passages <= NAME_SPACE:
            raise ValueError(f"passages must be between 1 and {NAME_SPACE:,} (distinct 4-syllable names), "
                             f"got {self.passages}")


def passage_name(i: int, seed: int = 0) -> str:
    """The title of passage `i`: 4 syllables from the world's inventory, unique for i < NAME_SPACE."""
    code = (i * _SCRAMBLE + 2_654_435 + seed * 7_919) % NAME_SPACE  # offset: passage 0 is not Babababa
    code, last = divmod(code, len(FINAL_SYLLABLES))
    code, mid2 = divmod(code, len(SYLLABLES))
    first, mid1 = divmod(code, len(SYLLABLES))
    return _FIRST[first] + SYLLABLES[mid1] + SYLLABLES[mid2] + FINAL_SYLLABLES[last]


def passage_id(i: int) -> str:
    return f"p{i:08d}"


def _sentences(name: str, kind: str, rng: random.Random, other) -> Iterator[str]:
    """Endless sentences about `name` (a `kind`); `other()` names another passage's entity."""
    if kind == "person":
        yield f"{name} was born in {other()} in {rng.randint(1700, 1999)}."
        yield f"{name} worked as a {rng.choice(JOBS)} and studied {rng.choice(FIELDS)} with {other()}."
    elif kind == "city":
        yield f"{name} is a city in {other()}, known for its {rng.choice(KNOWN_FOR)}."
        yield f"The {rng.choice(LANDMARK_KINDS)} of {name} was built in {rng.randint(1200, 1950)}."
    else:
        yield f"{name} is a {rng.choice(LANDMARK_KINDS)} in {other()}, built in {rng.randint(1200, 1950)}."
        yield f"Visitors to {name} come for its {rng.choice(KNOWN_FOR)} and its {rng.choice(KNOWN_FOR)}."
    while True:
        pick = rng.randrange(6)
        if pick == 0:
            yield f"In {rng.randint(1700, 1999)} a {rng.choice(EVENTS)} in {other()} changed the life of {name}."
        elif pick == 1:
            yield f"{name} is often compared with {other()} and {other()}, though the two differ in {rng.choice(FIELDS)}."
        elif pick == 2:
            yield f"Records from {other()} describe {name} as a centre of {rng.choice(KNOWN_FOR)} and {rng.choice(FIELDS)}."
        elif pick == 3:
            yield f"A {rng.choice(JOBS)} named {other()} wrote about {name} after the {rng.choice(EVENTS)} of {rng.randint(1700, 1999)}."
        elif pick == 4:
            yield f"The {rng.choice(LANDMARK_KINDS)} near {name} is known for its {rng.choice(KNOWN_FOR)}."
        else:
            yield f"Later accounts link {name} to {other()} through {rng.choice(FIELDS)} and a shared {rng.choice(EVENTS)}."


def iter_passages(config: PassageConfig) -> Iterator[Document]:
    """Passages 0 .. config.passages - 1 in order, as Documents (id, title, text), one at a time."""
    rng = random.Random(config.seed)
    n, seed = config.passages, config.seed

    i = 0

    def other() -> str:  # another passage's entity (never the passage's own, unless it is alone)
        j = rng.randrange(n)
        return passage_name((j + 1) % n if j == i else j, seed)

    for i in range(n):
        name = passage_name(i, seed)
        words, parts = 0, []
        for sentence in _sentences(name, rng.choice(KINDS), rng, other):
            parts.append(sentence)
            words += sentence.count(" ") + 1
            if words >= config.words_min:
                break
        yield Document(passage_id(i), name, " ".join(parts))


def sample_indices(passages: int, count: int, seed: int) -> list[int]:
    """`count` distinct passage indices (all of them if fewer), from their own random stream."""
    return random.Random(f"queries-{seed}").sample(range(passages), min(count, passages))
