"""Invented names for the synthetic world, built from a fixed syllable inventory.

Every syllable is one onset consonant plus one vowel, so a name splits unambiguously into
two-letter pieces ("Karivo" -> ["Ka", "ri", "vo"]); a tokenizer can learn the pieces and unseen
names are new combinations of them. The last syllable ends in a, o or u: Porter/Snowball
stemmers leave such words unchanged, so a stemming BM25 index still sees each name as one
unique token.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

ONSETS: tuple[str, ...] = ("b", "d", "k", "l", "m", "n", "r", "s", "t", "v")
VOWELS: tuple[str, ...] = ("a", "e", "i", "o", "u")
FINAL_VOWELS: tuple[str, ...] = ("a", "o", "u")

# Lower-case pieces; the first syllable of a name is capitalised.
SYLLABLES: tuple[str, ...] = tuple(c + v for c in ONSETS for v in VOWELS)
FINAL_SYLLABLES: tuple[str, ...] = tuple(c + v for c in ONSETS for v in FINAL_VOWELS)

KNOWN_FOR: tuple[str, ...] = (
    "canals", "orchards", "festivals", "textiles", "libraries", "vineyards", "markets",
    "gardens", "harbours", "bells", "ceramics", "horses",
)
LANDMARK_KINDS: tuple[str, ...] = ("bridge", "tower", "museum", "temple", "market", "garden")


def split_name(name: str) -> list[str]:
    """Split a name into its syllables: "Karivo" -> ["Ka", "ri", "vo"]."""
    return [name[i : i + 2] for i in range(0, len(name), 2)]


class SyllablePools:
    """Which syllables may fill the first, middle and last position of a name."""

    def __init__(self, first: Iterable[str], middle: Iterable[str], last: Iterable[str]):
        # Sorted so that rng.choice is independent of set iteration order.
        self.first = tuple(sorted(set(first)))
        self.middle = tuple(sorted(set(middle)))
        self.last = tuple(sorted(set(last)))
        if not (self.first and self.last):
            raise ValueError("the first and last syllable pools need at least one syllable")

    @classmethod
    def full(cls) -> "SyllablePools":
        return cls((s.capitalize() for s in SYLLABLES), SYLLABLES, FINAL_SYLLABLES)

    @classmethod
    def seen_in(cls, names: Sequence[str]) -> "SyllablePools":
        """The pools observed in `names`, position by position (first / middle / last)."""
        pieces = [split_name(n) for n in names]
        middle = [p[1] for p in pieces if len(p) == 3]  # empty: only 2-syllable names
        return cls((p[0] for p in pieces), middle, (p[-1] for p in pieces))

    def contains(self, name: str) -> bool:
        p = split_name(name)
        return (
            p[0] in self.first
            and p[-1] in self.last
            and all(m in self.middle for m in p[1:-1])
        )


class NameGenerator:
    """Draws globally unique names (people, cities, countries and landmarks share one space)."""

    def __init__(self, rng: random.Random, reserved: Iterable[str] = ()):
        self.rng = rng
        self.used: set[str] = {r.lower() for r in reserved}

    def draw(self, pools: SyllablePools, max_tries: int = 10_000) -> str:
        for _ in range(max_tries):
            n_syllables = self.rng.choice((2, 3)) if pools.middle else 2
            middle = [self.rng.choice(pools.middle) for _ in range(n_syllables - 2)]
            name = self.rng.choice(pools.first) + "".join(middle) + self.rng.choice(pools.last)
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name
        raise RuntimeError(
            f"could not draw a new unique name after {max_tries} tries ({len(self.used)} used); "
            "ask for fewer entities or widen the syllable inventory"
        )

    def draw_many(self, n: int, pools: SyllablePools) -> list[str]:
        return [self.draw(pools) for _ in range(n)]
