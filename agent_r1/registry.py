"""One registry style for everything chosen by name in params.yaml (after verl's `register_adv_est`).

A `Registry` maps a name to a thing (an estimator function, a loss, an env builder) and, where the
kind needs them, to its traits: a small frozen dataclass of properties that the config's validation
and the trainer read instead of naming the things themselves::

    ADV_ESTIMATORS = Registry("advantage estimator", key="algo.adv_estimator",
                              where="agent_r1.algos.ADV_ESTIMATORS", traits=EstimatorTraits)

    @ADV_ESTIMATORS.register("grpo", group=True)
    def _grpo(x): ...

    ADV_ESTIMATORS["grpo"]                 # the function; an unknown name lists the known ones
    ADV_ESTIMATORS.traits("grpo").group    # True: validation asks for rollout.n_samples >= 2
    ADV_ESTIMATORS.check(value, "algo.adv_estimator")  # at config load: the key, the value, the choices

A registry is a read-only `Mapping` (`in`, iteration over names, `sorted(...)`), so code that took
the plain dicts before still reads it the same way. Bottom layer: it imports nothing of agent_r1.

Installed packages add entries without a fork through an entry-point group (`plugins=`), e.g.

    [project.entry-points."agent_r1.envs"]
    my_env = "my_package.envs:my_envs"

Discovery reads package metadata only; the module is imported when its name is first looked up
(`REG[name]`, `REG.check(name)`), so `env.kind: my_env` in params.yaml works from the CLI too. A
module that registers the name itself (with its traits) wins; otherwise the entry point's object is
registered under its name with default traits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")
M = TypeVar("M")


@dataclasses.dataclass(frozen=True)
class NoTraits:
    """The traits of a registry whose entries carry no properties."""


class UnknownName(KeyError, ValueError):
    """An unknown name: a KeyError for Mapping code, a ValueError for callers that check input."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


class Registry(Mapping[str, T], Generic[T, M]):
    """Name -> thing, plus typed traits per name.

    kind:   what an entry is, in words ("advantage estimator"), for error messages.
    key:    the config key that chooses an entry ("algo.adv_estimator"), if one does.
    where:  the import path of this registry, so an error can say how to add an entry.
    traits: a frozen dataclass; `register(name, **fields)` builds one per entry (unknown fields fail
            at registration, not at use).
    plugins: an entry-point group whose entries are loaded on first lookup of their name.
    builtins: name -> the module that registers it, imported on first lookup of that name (heavy
            backends: using one never imports the others' dependencies).
    """

    def __init__(self, kind: str, *, key: str = "", where: str = "", traits: Callable[..., M] = NoTraits,
                 plugins: str = "", builtins: Mapping[str, str] | None = None) -> None:  # type: ignore[assignment]
        self.kind, self.key, self.where, self.plugins = kind, key, where, plugins
        self.builtins = dict(builtins or {})
        self._traits_type = traits
        self._items: dict[str, T] = {}
        self._traits: dict[str, M] = {}

    # ---------------------------------------------------------------- adding and removing

    def register(self, name: str, thing: T | None = None, /, *, replace: bool = False,
                 **traits: Any) -> Any:
        """`@REG.register("name", **traits)` on a function or class, or `REG.register("name", thing)`.
        Returns the thing unchanged, so decorators stack (one function under several names).
        Registering the same object again is a no-op; another object under a taken name fails
        unless `replace=True`."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        try:
            made = self._traits_type(**traits)
        except TypeError as err:
            fields = [f.name for f in dataclasses.fields(self._traits_type)] if dataclasses.is_dataclass(
                self._traits_type) else []
            raise TypeError(f"{self.kind} {name!r}: {err}; the traits a {self.kind} may declare: {fields}") from None

        def add(obj: T) -> T:
            held = self._items.get(name)
            if held is not None and held is not obj and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered ({held!r}); pick another name, "
                                 "or pass replace=True to override it on purpose")
            self._items[name] = obj
            self._traits[name] = made
            return obj

        return add if thing is None else add(thing)

    def unregister(self, name: str) -> T | None:
        """Removes `name` (tests, notebooks); returns what was registered, or None."""
        self._traits.pop(name, None)
        return self._items.pop(name, None)

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Registry[T, M]]:
        """`with REG.scratch(): ...`: whatever the block registers, replaces or removes is undone after it
        (tests, notebooks). The built-ins' modules are imported first: one imported inside the block
        registers there, and a module is imported once per process, so its entries would not come back."""
        for module in sorted(set(self.builtins.values())):
            importlib.import_module(module)
        items, traits = dict(self._items), dict(self._traits)
        try:
            yield self
        finally:
            self._items, self._traits = items, traits

    # ---------------------------------------------------------------- reading

    def __getitem__(self, name: str) -> T:
        if name not in self and not self._load_plugin(name):
            raise UnknownName(f"unknown {self.kind} {name!r}; known: {self.names()}. {self.how()}")
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._items
        except TypeError:
            return False

    def names(self) -> list[str]:
        """Every registered name, and every installed plugin's, sorted."""
        return sorted(set(self._items) | set(self.builtins) | {ep.name for ep in self._entry_points()})

    def traits(self, name: str) -> M:
        """The traits `name` was registered with (an unknown name fails as `[name]` does)."""
        self[name]
        return self._traits[name]

    def check(self, value: Any, key: str | None = None) -> None:
        """Fails unless `value` is registered: the config key, the value, the choices and how to add one.
        A built-in name passes without importing its module; a plugin's name imports it (its traits)."""
        known = value in self or (isinstance(value, str) and value in self.builtins)  # known without importing it
        if not known and not self._load_plugin(value):
            raise UnknownName(f"{key or self.key or self.kind}={value!r}; choose one of {self.names()}. {self.how()}")

    def how(self) -> str:
        """How a user adds an entry (a sentence for error messages)."""
        if not self.where:
            return "docs/extending.md says how to add one."
        module, _, name = self.where.rpartition(".")
        plugin = f", or an entry point in the {self.plugins!r} group" if self.plugins else ""
        return f'Add one with `from {module} import {name}` and @{name}.register("name"){plugin} (docs/extending.md).'

    # ---------------------------------------------------------------- built-in modules and installed plugins

    def _entry_points(self, name: str | None = None) -> list[metadata.EntryPoint]:
        if not self.plugins:
            return []
        found = metadata.entry_points(group=self.plugins)
        return [ep for ep in found if name is None or ep.name == name]

    def _load_plugin(self, name: Any) -> bool:
        """Imports the built-in module or the installed plugin that declares `name`; True when `name` is
        registered after."""
        if not isinstance(name, str) or not name:
            return False
        if name in self.builtins:
            importlib.import_module(self.builtins[name])
            if name in self._items:
                return True
        for ep in self._entry_points(name)[:1]:
            try:
                thing = ep.load()
            except Exception as exc:
                raise ImportError(f"{self.kind} plugin {name!r} ({entry_point_origin(ep)}) failed to load: "
                                  f"{type(exc).__name__}: {exc}. Check that its package is installed in this "
                                  "environment and imports on its own") from exc
            if name not in self._items:  # its module did not register it (with traits) itself
                self.register(name, thing)
        return name in self._items

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def entry_point_origin(ep: metadata.EntryPoint) -> str:
    """`name = module:object in package version`, for errors about a plugin."""
    dist = getattr(ep, "dist", None)
    package = f" in {dist.name} {dist.version}" if dist is not None else ""
    return f"{ep.name} = {ep.value}{package}"
