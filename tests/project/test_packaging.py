"""pyproject.toml declares compatible ranges; constraints.txt pins the versions verified together.
Every declared dependency has a pin, the pin lies in the declared range, and the environment the
tests run in holds exactly the pinned versions."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def _declared(extras: tuple[str, ...] = ("dev",)) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return [Requirement(r) for r in reqs]


def _pins() -> dict[str, Version]:
    pins = {}
    for n, line in enumerate((REPO / "constraints.txt").read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"constraints.txt:{n} {line!r} is not an exact pin"
        name = canonicalize_name(req.name)
        assert name not in pins, f"constraints.txt pins {req.name} twice"
        pins[name] = Version(specs[0].version)
    return pins


def test_every_dependency_is_pinned_inside_its_declared_range():
    pins = _pins()
    problems = []
    for req in _declared():
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name}: no pin in constraints.txt")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req.name}: pinned {pin} is outside the declared range {req.specifier}")
    assert not problems, problems


def test_declared_ranges_are_ranges_except_where_said():
    """Exact pins refuse the versions a user's image already has: only the bench extra (installed
    without the constraints file) keeps one."""
    exact = [str(r) for r in _declared() if any(s.operator == "==" for s in r.specifier)]
    assert exact == []
    python = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"])
    assert all(v in python for v in ("3.11", "3.12", "3.13")), python


def test_installed_versions_equal_the_constraints():
    pins = _pins()
    wrong = []
    for name, pin in sorted(pins.items()):
        try:
            installed = Version(version(name))
        except PackageNotFoundError:
            wrong.append(f"{name}: pinned {pin}, not installed")
            continue
        # a local tag (torch 2.13.0+cpu) is the same release as the pin
        if Version(installed.public) != pin:
            wrong.append(f"{name}: pinned {pin}, installed {installed}")
    assert not wrong, f"run `make install` (pip install -c constraints.txt -e '.[dev]'): {wrong}"
