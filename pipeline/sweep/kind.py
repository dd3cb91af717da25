"""What every sweep kind shares: the ``SweepKind`` interface, the ``Sweep`` the engine runs,
the ``Grid`` base and the kinds ``installed``.

A sweep kind turns a config section into cells, runs them as Dask tasks and names what its
store holds (a ``pipeline.results`` schema). ``pipeline.results.registry.KINDS`` registers them by
the store's ``kind`` attribute; the engine (``pipeline.sweep.engine``) looks the kind up and
runs any kind the same way: resume, progress, failures, flushes. This module imports no
config: the config's schema is assembled from the kinds it lists.
"""

from __future__ import annotations

import functools
import json
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np
import xarray as xr
from dask import delayed
from distributed import Client, Future

from pipeline.results.registry import KINDS, Kind
from pipeline.results.schema import Schema

_DTYPES = {str: object, int: np.int64, float: np.float64}
"""A coordinate's dtype by the type of its values."""

RUN_SETTINGS: dict[str, str] = {
    "cluster": "where the cells run, not what they compute",
    "store": "where the results go",
    "overwrite": "whether a store is replaced, not what goes in it",
    "retries": "how often a task is tried again after a lost worker",
    "max_cells": "a refusal before the sweep starts",
    "flush_seconds": "how often finished cells reach the disk",
    "progress_seconds": "how often progress is printed",
    "performance_report": "whether Dask's performance report is saved",
}
"""Keys of every config that change how a sweep runs but no stored value, with the reason:
a resume may change them (each run's config is kept in the store's ``runs``)."""


class Grid:
    """The cells of one sweep and the coordinates of its store.

    A kind's grid is a frozen dataclass that subclasses this and gives

    - ``Cell``: the ``NamedTuple`` of a cell, whose fields (typed ``str``, ``int`` or
      ``float``) are the cell dims in the order of every result variable;
    - ``axes()``: the values of every dim of the store, in coordinate order: the cell dims
      first, then those of the variables' own axes (``t``, ``epoch``, ``p``), each a
      sequence (a ``range`` for steps: ``sizes`` counts them before any is made);
    - ``cells()``: every cell, in the order they are computed;
    - ``identity()``: everything that determines the results' values, as JSON-able values;

    and gets from here the coordinates, a cell's index, the fingerprint a store is checked
    against, and which cells exist over any of the dims (``in_grid``).
    """

    Cell: ClassVar[type[NamedTuple]]

    def axes(self) -> dict[str, Sequence]:
        raise NotImplementedError

    def cells(self) -> list:
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        raise NotImplementedError

    def value_free(self) -> dict[str, str]:
        """The config keys (a key names its whole section) that change no stored value of
        this grid, each with the reason; every other key is in ``identity()`` (tested by
        perturbing each key in turn). Default: ``RUN_SETTINGS``."""
        return RUN_SETTINGS

    def long_names(self) -> dict[str, str]:
        """Coordinate ``long_name``s that depend on the grid (beyond the schema's)."""
        return {}

    def run_attrs(self) -> dict[str, Any]:
        """Attributes of the store (and of each run's record) that describe how this grid's
        cells run, beyond its identity; none by default."""
        return {}

    def dim_lengths(self) -> dict[str, int]:
        """The length of every dim of the store (``axes()``'s, each a sequence with a length,
        e.g. a ``range`` for steps, so no dim is made to be counted)."""
        return {dim: len(values) for dim, values in self.axes().items()}

    def n_cells(self) -> int:
        """How many cells the grid has."""
        return len(self.cells())

    @property
    def DIMS(self) -> tuple[str, ...]:
        return self.Cell._fields

    @functools.cached_property
    def _positions(self) -> dict[str, dict]:
        axes = self.axes()
        return {dim: {value: k for k, value in enumerate(axes[dim])} for dim in self.DIMS}

    def coords(self) -> dict[str, np.ndarray]:
        """The store's coordinates: a cell dim's dtype follows its ``Cell`` field's type
        (``str``: object), another dim's its values'."""
        hints = typing.get_type_hints(self.Cell)
        coords = {}
        for dim, values in self.axes().items():
            kind = hints.get(dim) or type(values[0])
            coords[dim] = np.array(values, dtype=_DTYPES[kind])
        return coords

    def index(self, cell) -> tuple[int, ...]:
        """Positions of ``cell`` along ``DIMS``."""
        positions = self._positions
        try:
            return tuple(positions[dim][value] for dim, value in zip(self.DIMS, cell, strict=True))
        except KeyError:
            raise ValueError(f"{cell} is not a cell of this grid") from None

    def fingerprint(self) -> str:
        """``identity()`` as canonical JSON: a store resumes only a grid of the same one."""
        return json.dumps(self.identity(), sort_keys=True)

    def grows(self, stored: dict) -> bool:
        """Whether this grid holds every cell of the grid whose ``identity()`` a store holds
        (``stored``), with the same meaning, and more: the store grows to it, its cells kept.
        A kind whose grids cannot grow keeps this default (no)."""
        return False

    def in_grid(self, dims: tuple[str, ...]) -> np.ndarray:
        """bool over ``dims`` (cell dims): whether any cell lies there."""
        at = [self.DIMS.index(dim) for dim in dims]
        axes = self.axes()
        exists = np.zeros([len(axes[dim]) for dim in dims], dtype=bool)
        for cell in self.cells():
            index = self.index(cell)
            exists[tuple(index[k] for k in at)] = True
        return exists


class SweepKind(Protocol):
    """A kind of sweep: its ``sweep`` module (``pipeline.kinds.<kind>.sweep``, or a plug-in's,
    named by its ``pipeline.kinds.Kind``) has this interface.

    - ``SCHEMA``: what its store holds (``pipeline.results``), named by the store's ``kind``;
    - ``SECTION``: the config section holding its settings, named like the kind, set only
      when the config's ``kind`` is this kind (``methods.grid``, ``training.max_epochs``),
      and ``CONFIG``: the dataclass that types the section (keys, types, defaults, and each
      field's docstring, which ``--help`` and the config reference show;
      ``pipeline.sweep.config.schema.sweep_config`` makes the whole config's schema of every
      installed kind's);
    - ``validate(cfg)``: raise ``ConfigError`` naming the first invalid key of its section;
    - ``grid(cfg)``: the ``Grid`` of a validated config;
    - ``submit(client, grid, cells, *, store)``: send ``cells`` to the Dask ``client``;
      return each future with the cells its result holds: one cell's record (the schema's
      ``record``, a field per variable), or a list of them in order;
      ``store`` is the store's path (a kind may save files beside it);
    - ``summary(ds)``: the table the sweep prints at its end;
    - optionally ``verify(grid)``: raise ``ConfigError`` unless what the cells will read (a
      model file) is valid, once, before any cluster starts, and ``check_memory(grid,
      limit)``: raise ``ConfigError`` for a cell that cannot fit a worker of ``limit`` bytes.
      ``Sweep.of`` gives a module without them the defaults: nothing to check.

    The config reaches a kind at ``validate`` and ``grid`` only: its ``Grid`` (frozen) holds
    everything the kind's tasks need, normalised there.
    """

    SCHEMA: Schema
    SECTION: str
    CONFIG: type

    def validate(self, cfg) -> None: ...

    def grid(self, cfg) -> Grid: ...

    def submit(self, client, grid: Grid, cells: list, *, store: Path) -> dict: ...

    def summary(self, ds: xr.Dataset) -> str: ...


_OPTIONAL = ("verify", "check_memory")
"""The members a kind's ``sweep`` module may leave out: ``Sweep``'s with a default."""


def _nothing_to_verify(grid: Grid) -> None:
    """The default ``verify``: the cells read nothing but their config."""


def _any_memory_fits(grid: Grid, limit: int) -> None:
    """The default ``check_memory``: the kind estimates no cell's memory."""


@dataclass(frozen=True)
class Sweep:
    """A sweep kind as the engine runs it: the members of its ``SweepKind`` module, the two
    optional ones in place (``verify`` and ``check_memory``: a module without them checks
    nothing there). ``Sweep.of`` is the one place that reads a module's members."""

    SCHEMA: Schema
    SECTION: str
    CONFIG: type
    validate: Callable[[Any], None]
    grid: Callable[[Any], Grid]
    submit: Callable[..., dict]
    summary: Callable[[xr.Dataset], str]
    verify: Callable[[Grid], None] = _nothing_to_verify
    check_memory: Callable[[Grid, int], None] = _any_memory_fits

    @classmethod
    def of(cls, module: SweepKind) -> Sweep:
        """The sweep of a kind's ``sweep`` module (``pipeline.results.registry.Kind.load``),
        with the defaults for the optional members it does not define."""
        optional = {name: getattr(module, name) for name in _OPTIONAL if hasattr(module, name)}
        return cls(
            SCHEMA=module.SCHEMA,
            SECTION=module.SECTION,
            CONFIG=module.CONFIG,
            validate=module.validate,
            grid=module.grid,
            submit=module.submit,
            summary=module.summary,
            **optional,
        )


def load(kind: Kind) -> Sweep:
    """The ``Sweep`` of a registered kind, its ``sweep`` module imported now."""
    return Sweep.of(kind.load("sweep"))


def submit_each(client: Client, function, cells: list, *args, prefix: str) -> dict[Future, list]:
    """One task ``function(cell, *args)`` per cell, keyed ``<prefix>-<cell>``; the future of
    each and the cells it computes (the training and coupled sweeps)."""
    tasks = [
        delayed(function)(cell, *args, dask_key_name=f"{prefix}-{'-'.join(map(str, cell))}")
        for cell in cells
    ]
    futures = client.compute(tasks)
    return {future: [cell] for future, cell in zip(futures, cells, strict=True)}


@functools.cache
def installed() -> dict[str, Sweep]:
    """Kind name -> its ``Sweep``, for every kind whose modules import: the built-ins, then
    plug-ins (one that fails to import only warns, until a config names it)."""
    found = {}
    for name, kind in KINDS.items():
        try:
            found[name] = load(kind)
        except Exception as error:  # any failure of a plug-in's import is reported alike
            warnings.warn(f"sweep kind {name!r}: {error}", RuntimeWarning, stacklevel=2)
    return found
