"""The results store: one zarr store per sweep, an xarray Dataset over the grid.

Only the sweep's client process writes, so writes never collide: the store
is created once from a template, the client keeps a mirror of every variable
in memory, and ``flush`` writes whole chunks of the ``(family, n_states)``
pairs whose cells changed, the ``done`` mask last. zarr's local store writes
each chunk to a temporary file and renames it into place, so an interrupted
flush leaves every chunk either old or new; cells whose ``done`` flag did not
reach the disk are simply computed again on the next run.

Read it with plain xarray: ``xr.open_zarr(path)``.
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from pipeline.config import ConfigError
from pipeline.grid import DIMS, Cell, Grid
from pipeline.metrics import tv_bounds

MODEL = ("family", "n_states", "seed")
TOPP = ("family", "n_states", "p", "seed")
CELL = DIMS


@dataclass(frozen=True)
class Variable:
    dims: tuple[str, ...]
    units: str
    long_name: str
    dtype: str = "float64"


VARIABLES: dict[str, Variable] = {
    "tv": Variable(
        (*CELL, "t"), "1", "total variation TV(P_t, Q_t) between exact and top-p beliefs"
    ),
    "bound": Variable(
        (*TOPP, "t"), "1", "recursive bound (1-p) sum_{i<=t} (1-gamma)^i on the prediction TV"
    ),
    "bound_mixing": Variable(TOPP, "1", "Theorem 4.3 bound (1-p)/gamma on the prediction TV"),
    "certificate": Variable(
        (*CELL, "t"),
        "1",
        "online bound on the prediction TV from the top-p run alone (prediction mode)",
    ),
    "gamma": Variable(
        MODEL, "1", "minimal mixing rate of the exact transition matrix (see gamma_exact)"
    ),
    "gamma_exact": Variable(
        MODEL, "1", "gamma is exact; false: it is the Doeblin lower bound", "bool"
    ),
    "doeblin": Variable(MODEL, "1", "Doeblin lower bound sum_j min_i T[i, j] on gamma"),
    "sparsity": Variable(TOPP, "1", "fraction of zero entries of the top-p transition matrix"),
    "nnz": Variable(TOPP, "1", "stored entries of the top-p transition matrix"),
    **{
        f"runtime_{backend}{suffix}": Variable(
            (*CELL, "t"),
            "s",
            f"cumulative runtime of {what} inference to step t, {statistic} over repeats",
        )
        for backend, what in (("dense", "exact (dense or structured)"), ("sparse", "top-p sparse"))
        for suffix, statistic in (("", "median"), ("_min", "min"), ("_max", "max"))
    },
    "repeats": Variable(CELL, "1", "interleaved dense/sparse run pairs timed"),
    "speedup": Variable(
        CELL, "1", "exact over top-p runtime of the whole horizon, median of repeats"
    ),
    "log_evidence": Variable(
        CELL, "nat", "log evidence of the observations under the exact model (filter)"
    ),
    "log_evidence_error": Variable(
        CELL, "nat", "log evidence under the top-p model minus the exact (filter)"
    ),
    "zero_evidence": Variable(
        CELL, "1", "steps whose observation had zero probability under top-p"
    ),
    "build_time_model": Variable(MODEL, "s", "time to build the exact model"),
    "build_time_topp": Variable(TOPP, "s", "time to build the top-p model"),
    "gamma_time": Variable(MODEL, "s", "time to compute gamma exactly"),
    "failed": Variable(CELL, "1", "the cell failed after every retry", "bool"),
    "error": Variable(CELL, "1", "error message of a failed cell", "str"),
    "done": Variable(CELL, "1", "the cell finished and its results are stored", "bool"),
}
"""Every variable updated cell by cell; ``done`` is written last."""

_FILL = {"float64": np.nan, "bool": False, "str": ""}


def _template(grid: Grid, attrs: dict) -> tuple[xr.Dataset, dict]:
    """The empty Dataset of ``grid`` and its zarr encoding."""
    coords = grid.coords()
    data, encoding = {}, {}
    for name, variable in VARIABLES.items():
        shape = tuple(coords[d].size for d in variable.dims)
        dtype = object if variable.dtype == "str" else variable.dtype
        data[name] = xr.Variable(
            variable.dims,
            np.full(shape, _FILL[variable.dtype], dtype),
            {"units": variable.units, "long_name": variable.long_name},
        )
        encoding[name] = {"chunks": (1, 1, *shape[2:])}
    bounds = {p: tv_bounds(p, 1.0, coords["t"]) for p in grid.p}
    data["bound_linear"] = xr.Variable(
        ("p", "t"),
        np.array([bounds[p]["linear"] for p in grid.p]),
        {"units": "1", "long_name": "Corollary 1 bound (t+1)(1-p) on the prediction TV"},
    )
    data["bound_single_step"] = xr.Variable(
        ("p",),
        np.array([bounds[p]["single_step"][0] for p in grid.p]),
        {"units": "1", "long_name": "Theorem 4.1 bound 1-p on one top-p step"},
    )
    if not grid.is_product:
        data["in_grid"] = xr.Variable(
            ("family", "n_states"),
            grid.in_grid,
            {"units": "1", "long_name": "the grid has this size"},
        )
    dataset = xr.Dataset(data, coords=coords, attrs={**attrs, "grid": grid.fingerprint()})
    dataset["n_states"].attrs.update(units="1", long_name="number of hidden states")
    dataset["p"].attrs.update(units="1", long_name="top-p probability mass kept")
    dataset["t"].attrs.update(units="1", long_name="time step")
    return dataset, encoding


def _consolidate(path: Path) -> None:
    """Refresh the consolidated metadata, so ``xr.open_zarr`` opens the store quietly."""
    with warnings.catch_warnings():
        # zarr notes that consolidated metadata is not yet part of the v3 spec.
        warnings.simplefilter("ignore", category=UserWarning)
        zarr.consolidate_metadata(path)


def _difference(stored: str, wanted: str) -> str:
    old, new = json.loads(stored), json.loads(wanted)
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            return f"{key} is {old.get(key)} in the store but {new.get(key)} in this run"
    return "the grids differ"


class ResultStore:
    """The store of one sweep, with an in-memory mirror of every cell variable.

    Use ``ResultStore.open`` to create or resume; ``record`` and
    ``record_failure`` update the mirror, ``flush`` writes it.
    """

    def __init__(self, path: Path, grid: Grid, group: zarr.Group, arrays: dict[str, np.ndarray]):
        self.path, self.grid, self._group, self._arrays = path, grid, group, arrays
        self._dirty: set[tuple[int, int]] = set()

    @staticmethod
    def check(path: Path, grid: Grid, *, overwrite: bool = False) -> bool:
        """Whether ``path`` holds a store of ``grid`` to resume; reads, never writes.

        Raises ``ConfigError`` when ``path`` holds something else, or a store
        of another grid and ``overwrite`` is false.
        """
        path = Path(path)
        if not path.exists():
            return False
        try:
            group = zarr.open_group(path, mode="r", use_consolidated=False)
            stored = group.attrs["grid"]
        except (KeyError, FileNotFoundError, ValueError, TypeError):
            raise ConfigError(
                "store",
                f"{path} exists but is not a results store of this pipeline; choose another store=",
            ) from None
        missing = sorted(set(VARIABLES) - set(group.array_keys()))
        if missing and not overwrite:
            raise ConfigError(
                "store",
                f"{path} was written by an older version of the pipeline (it lacks "
                f"{', '.join(missing)}); pass overwrite=true to compute it again",
            )
        if stored == grid.fingerprint() and not missing:
            return True
        if overwrite:
            return False
        raise ConfigError(
            "store",
            f"{path} holds a different sweep: "
            f"{_difference(stored, grid.fingerprint())}; choose "
            "another store= or pass overwrite=true to replace it",
        )

    @classmethod
    def open(cls, path: Path, grid: Grid, attrs: dict, *, overwrite: bool = False) -> ResultStore:
        """Resume the store of ``grid`` at ``path``, or create it (see ``check``)."""
        path = Path(path)
        if cls.check(path, grid, overwrite=overwrite):
            group = zarr.open_group(path, mode="r+", use_consolidated=False)
            arrays = {name: np.asarray(group[name][...]) for name in VARIABLES}
            store = cls(path, grid, group, arrays)
            store.update_attrs(runs=int(group.attrs.get("runs", 1)) + 1)
            return store
        if path.exists():
            shutil.rmtree(path)
        dataset, encoding = _template(grid, {**attrs, "runs": 1})
        dataset.to_zarr(path, mode="w", encoding=encoding, consolidated=False)
        _consolidate(path)
        arrays = {name: dataset[name].values.copy() for name in VARIABLES}
        return cls(path, grid, zarr.open_group(path, mode="r+", use_consolidated=False), arrays)

    def todo(self) -> list[Cell]:
        """The cells of the grid not yet done, in grid order."""
        done = self._arrays["done"]
        return [cell for cell in self.grid.cells() if not done[self.grid.index(cell)]]

    @property
    def n_done(self) -> int:
        return int(self._arrays["done"].sum())

    @property
    def n_failed(self) -> int:
        return int(self._arrays["failed"].sum())

    def record(self, cell: Cell, values: dict) -> None:
        """Put a finished cell's ``values`` (variable name -> value) in the mirror."""
        index = dict(zip(DIMS, self.grid.index(cell), strict=True))
        for name, value in values.items():
            self._arrays[name][tuple(index[d] for d in VARIABLES[name].dims if d != "t")] = value
        self._set_status(cell, done=True, failed=False, error="")

    def record_failure(self, cell: Cell, message: str) -> None:
        self._set_status(cell, done=False, failed=True, error=message)

    def _set_status(self, cell: Cell, **status) -> None:
        position = self.grid.index(cell)
        for name, value in status.items():
            self._arrays[name][position] = value
        self._dirty.add(position[:2])

    def flush(self) -> None:
        """Write the chunks of every changed ``(family, n_states)`` pair, ``done`` last."""
        for pair in sorted(self._dirty):
            for name in VARIABLES:
                self._group[name][pair] = self._arrays[name][pair]
        self._dirty.clear()

    def update_attrs(self, **attrs) -> None:
        """Set Dataset attributes (and refresh the consolidated metadata)."""
        self._group.attrs.update(attrs)
        _consolidate(self.path)
