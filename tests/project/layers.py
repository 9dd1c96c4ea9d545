"""The layers of agent_r1, read from their one statement, docs/layers.json, and the part of
docs/architecture.md drawn from it (a picture and two tables between the `layers` markers).

    python -m tests.project.layers           rewrite docs/architecture.md's layers section from docs/layers.json
    python -m tests.project.layers --check   exit 1 if the page differs from what the file says

tests/project/test_layers.py reads `LAYERS` and `NEVER` from here and holds the code to them.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "docs" / "layers.json"
PAGE = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- layers: written by `python -m tests.project.layers` from docs/layers.json -->", "<!-- /layers -->"


@dataclass(frozen=True)
class Layer:
    name: str
    units: tuple[str, ...]
    what: str
    outside: tuple[str, ...] = ()


def _load() -> dict:
    return json.loads(SOURCE.read_text())


def layers() -> list[Layer]:
    """Bottom to top."""
    return [Layer(x["name"], tuple(x["units"]), x["what"], tuple(x.get("outside", ()))) for x in _load()["layers"]]


def _units(name: str | list[str], everything: list[Layer], to: str) -> list[str]:
    """A rule's side as units: a unit, a list of them, a layer's name, or "library" (every unit but `to`)."""
    names = [name] if isinstance(name, str) else name
    out: list[str] = []
    for n in names:
        layer = next((x for x in everything if x.name == n), None)
        if n == "library":
            out += [u for x in everything for u in x.units if u != to]
        else:
            out += list(layer.units) if layer is not None and n not in layer.units else [n]
    return out


def never() -> list[tuple[str, str, str]]:
    """(from unit, to unit, why) for every forbidden arrow."""
    everything = layers()
    rows = []
    for rule in _load()["never"]:
        for target in _units(rule["to"], everything, ""):
            rows += [(source, target, rule["why"]) for source in _units(rule["from"], everything, target)]
    return rows


LAYERS: list[set[str]] = [set(x.units) for x in layers()]
NEVER: list[tuple[str, str, str]] = never()


def _shown(unit: str) -> str:
    return f"`{unit.replace('.', '/')}.py`" if "." in unit or unit in _MODULES else f"`{unit}/`"


_MODULES = {p.stem for p in (REPO / "agent_r1").glob("*.py")}


def _side(value: str | list[str]) -> str:
    names = [value] if isinstance(value, str) else value
    units = {u for x in layers() for u in x.units}
    return ", ".join(_shown(n) if n in units else n for n in names)


def render() -> str:
    """The section: a picture of the layers (top to bottom, as imports point), then both tables."""
    everything = layers()
    lines = ["```mermaid", "flowchart TB"]
    for i, layer in reversed(list(enumerate(everything))):
        packages = ", ".join([_shown(u).strip("`") for u in layer.units] + list(layer.outside))
        lines.append(f'  L{i}["{i} {layer.name}<br/>{packages}"]')
    lines += [f"  L{i} --> L{i - 1}" for i in range(len(everything) - 1, 0, -1)]
    lines += ["```", "", "| layer | packages | what it is |", "|---|---|---|"]
    for i, layer in enumerate(everything):
        packages = ", ".join([_shown(u) for u in layer.units] + [f"`{o}` outside the package" for o in layer.outside])
        lines.append(f"| {i} {layer.name} | {packages} | {layer.what} |")
    lines += ["", "Arrows that must never exist, whatever the layers allow (each with the reason):", "",
              "| from | to | why |", "|---|---|---|"]
    lines += [f"| {_side(r['from'])} | {_side(r['to'])} | {r['why']} |" for r in _load()["never"]]
    return "\n".join(lines)


def written(page: str) -> str:
    """`page` with its layers section replaced by today's rendering."""
    head, sep, rest = page.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{PAGE.relative_to(REPO)} has no `{BEGIN}` ... `{END}` section to write into")
    return f"{head}{BEGIN}\n{render()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is stale, without writing it")
    args = ap.parse_args(argv)
    page = PAGE.read_text()
    new = written(page)
    if args.check:
        if new != page:
            print(f"{PAGE.relative_to(REPO)}: the layers section differs from docs/layers.json; "
                  "run `python -m tests.project.layers`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
