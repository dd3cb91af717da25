"""Open registries: the built-ins of a kind plus what installed packages add by entry points.

A package adds a model family or a method without touching this one, in its
``pyproject.toml``::

    [project.entry-points."pipeline.families"]
    mine = "mypkg.family"

    [project.entry-points."pipeline.methods"]
    mymethod = "mypkg.method"

The object an entry point names (a module, or any object with the same attributes) has
the interface of a built-in: ``pipeline.models.Family`` or ``pipeline.methods.Method``.
Plug-ins are imported on first use, as xarray's backends are. One that fails to import,
or whose name is a built-in's, is a ``PluginError`` when it is used, naming the entry
point and its package; until then it only warns, so a broken plug-in never stops work
that does not use it.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class PluginError(ValueError):
    """A plug-in that cannot be used: the one-line message names its entry point and package."""


def _origin(entry: importlib.metadata.EntryPoint) -> str:
    """``mine = mypkg.family (package mypkg 0.1)``."""
    dist = entry.dist
    package = f"{dist.name} {dist.version}" if dist is not None else "unknown package"
    return f"entry point {entry.name} = {entry.value} ({package})"


class Registry(Mapping[str, T], Generic[T]):
    """Name -> object of one kind: ``builtins`` first, then the entry points of ``group``.

    Iterating lists every name that can be used (built-ins, then plug-ins by name) and
    imports every plug-in; looking one up imports only that one, once. A name nothing
    registers is a ``KeyError``; a plug-in that cannot be used is a ``PluginError``. A
    built-in given as a string, ``"module:attribute"``, is imported as an entry point's
    object is, on first use: for a registry below the objects it lists
    (``pipeline.results.registry``).
    """

    def __init__(self, kind: str, group: str, builtins: Mapping[str, T | str]):
        self.kind, self.group = kind, group
        self._builtins = dict(builtins)
        self._entries: dict[str, importlib.metadata.EntryPoint] | None = None
        self._loaded: dict[str, T] = {}
        self._problems: dict[str, str] = {}

    def _discover(self) -> dict[str, importlib.metadata.EntryPoint]:
        if self._entries is None:
            entries: dict[str, importlib.metadata.EntryPoint] = {}
            for entry in importlib.metadata.entry_points(group=self.group):
                if entry.name in self._builtins:
                    self._problems[entry.name] = (
                        f"the plug-in {_origin(entry)} takes the name of the built-in "
                        f"{self.kind} {entry.name!r}; rename the entry point"
                    )
                else:
                    entries.setdefault(entry.name, entry)
            self._entries = entries
        return self._entries

    def _load(self, name: str) -> T:
        if name not in self._loaded and name not in self._problems:
            entry = self._discover()[name]
            try:
                self._loaded[name] = entry.load()
            except Exception as error:  # any failure of a plug-in's import is reported alike
                first = (str(error).strip().splitlines() or [""])[0]
                self._problems[name] = (
                    f"the plug-in {self.kind} {name!r} ({_origin(entry)}) failed to import: "
                    f"{type(error).__name__}: {first}"
                )
        if name in self._problems:
            raise PluginError(self._problems[name])
        return self._loaded[name]

    def __getitem__(self, name: str) -> T:
        self._discover()
        if name in self._problems and name in self._builtins:
            raise PluginError(self._problems[name])
        if name in self._builtins:
            found = self._builtins[name]
            if isinstance(found, str):
                found = self._builtins[name] = importlib.metadata.EntryPoint(
                    name, found, self.group
                ).load()
            return found
        if name in self._discover():
            return self._load(name)
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        """Every name that resolves, importing each plug-in; the others only warn."""
        plugins = sorted(self._discover())
        names = [name for name in self._builtins if name not in self._problems]
        for name in plugins:
            try:
                self._load(name)
            except PluginError as error:
                warnings.warn(str(error), RuntimeWarning, stacklevel=2)
                continue
            names.append(name)
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def names(self) -> list[str]:
        """Every name registered, built-ins then plug-ins by name, importing no plug-in (a
        broken one is listed: using it says what is wrong)."""
        plugins = sorted(self._discover())
        return [name for name in self._builtins if name not in self._problems] + plugins

    def origin(self, name: str) -> str | None:
        """The package and version that registers ``name`` (``mypkg 0.1``); None for a
        built-in (whose version is this package's)."""
        if name in self._builtins:
            return None
        dist = self._discover()[name].dist
        return f"{dist.name} {dist.version}" if dist is not None else "unknown package"

    def lookup(self, name: str) -> T:
        """The object of ``name``; a one-line ``ValueError`` naming the allowed names for an
        unknown one, ``PluginError`` for a plug-in that cannot be used."""
        try:
            return self[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; allowed: {', '.join(self)}") from None
