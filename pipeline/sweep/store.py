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

from pipeline.methods import METHODS
from pipeline.sweep.config import ConfigError
from pipeline.sweep.grid import DIMS, Cell, Grid

FORMAT = 2
"""The layout of the store (attribute ``format``): 2 has the ``method`` and ``setting``
dims; stores without the attribute are of version 1 (a ``p`` dim, top-p only)."""

MODEL = ("family", "n_states", "seed")
APPROX = ("family", "n_states", "method", "setting", "seed")
CELL = DIMS
PREDICTION_ONLY = (
    "NaN in filter mode: with observations, conditioning can enlarge an error, so the "
    "recursion of Section 4 does not bound it"
)
NO_REFERENCE = "NaN where the model had no exact reference (n_states > exact_max_states)"


@dataclass(frozen=True)
class Variable:
    dims: tuple[str, ...]
    units: str
    long_name: str
    dtype: str = "float64"
    missing: str = ""
    """When the variable holds NaN for a cell that is done, and why (the ``missing`` attribute)."""


def _runtimes() -> dict[str, Variable]:
    return {
        f"runtime_{run}{suffix}": Variable(
            (*CELL, "t"),
            "s",
            f"cumulative runtime of {what} inference to step t, {statistic} over repeats",
            missing=NO_REFERENCE if run == "exact" else "",
        )
        for run, what in (("exact", "exact"), ("approx", "approximate"))
        for suffix, statistic in (("", "median"), ("_min", "min"), ("_max", "max"))
    }


def status_variables(dims: tuple[str, ...]) -> dict[str, Variable]:
    """Every sweep's status of a cell, over ``dims``; ``done`` last, so a flush writes it last."""
    return {
        "failed": Variable(dims, "1", "the cell failed after every retry", "bool"),
        "error": Variable(dims, "1", "error message of a failed cell", "str"),
        "done": Variable(dims, "1", "the cell finished and its results are stored", "bool"),
    }


VARIABLES: dict[str, Variable] = {
    "tv": Variable(
        (*CELL, "t"),
        "1",
        "total variation TV(P_t, Q_t) between exact and approximate beliefs",
        missing=NO_REFERENCE,
    ),
    "bound": Variable(
        (*APPROX, "t"),
        "1",
        "bound on the prediction TV: e_t = (1-gamma) e_(t-1) + eps from e_0 = eps_start",
    ),
    "bound_linear": Variable(
        (*APPROX, "t"), "1", "Corollary 1 bound eps_start + t eps on the prediction TV"
    ),
    "bound_mixing": Variable(
        APPROX, "1", "Theorem 4.3 bound max(eps_start, eps)/gamma on the prediction TV"
    ),
    "certificate": Variable(
        (*CELL, "t"),
        "1",
        "online bound on the prediction TV from the approximate run's own errors",
        missing=PREDICTION_ONLY,
    ),
    "eps": Variable(
        APPROX,
        "1",
        "most TV one step adds: max_i TV(T_i, Q_i) over transition rows, plus 1 - p of "
        "belief pruning (Theorem 4.1's 1 - p for top-p)",
    ),
    "eps_start": Variable(
        APPROX, "1", "most TV at step 0: TV of the approximate prior, plus 1 - p of pruning"
    ),
    "eps_mean": Variable(
        APPROX, "1", "mean over rows of TV(T_i, Q_i), plus 1 - p of belief pruning"
    ),
    "gamma": Variable(
        MODEL, "1", "minimal mixing rate of the exact transition matrix (see gamma_exact)"
    ),
    "gamma_exact": Variable(
        MODEL, "1", "gamma is exact; false: it is the Doeblin lower bound", "bool"
    ),
    "doeblin": Variable(MODEL, "1", "Doeblin lower bound sum_j min_i T[i, j] on gamma"),
    "sparsity": Variable(
        APPROX, "1", "fraction of zero entries of the transition matrix the approximate run uses"
    ),
    "stored_entries": Variable(
        APPROX, "1", "numbers stored for the transition matrix the approximate run uses"
    ),
    "work": Variable(
        CELL,
        "1",
        "multiply-adds of an approximate step over the stored entries of the rows of non-zero "
        "states, mean over steps (a CSR layout that steps mostly full columns as a dense panel "
        "also multiplies their zeros)",
    ),
    **_runtimes(),
    "repeats": Variable(CELL, "1", "interleaved exact/approximate run pairs timed"),
    "speedup": Variable(
        CELL,
        "1",
        "exact over approximate runtime of the whole horizon, median of repeats",
        missing=NO_REFERENCE,
    ),
    "log_evidence": Variable(
        CELL,
        "nat",
        "log evidence of the observations under the exact model (filter)",
        missing="NaN in predict mode (nothing observed) and without an exact reference",
    ),
    "log_evidence_error": Variable(
        CELL,
        "nat",
        "log evidence of the approximate run minus the exact (filter)",
        missing="NaN in predict mode (nothing observed) and without an exact reference",
    ),
    "zero_evidence": Variable(
        CELL, "1", "steps whose observation had zero probability in the approximate run"
    ),
    "impossible_observations": Variable(
        CELL,
        "1",
        "fraction of observations the approximate emissions make impossible for the state "
        "that emitted them (filter)",
        missing="NaN in predict mode (nothing observed)",
    ),
    "build_time_model": Variable(MODEL, "s", "time to build the exact model"),
    "build_time_approx": Variable(APPROX, "s", "time to build the approximation"),
    "gamma_time": Variable(MODEL, "s", "time to compute gamma (or its Doeblin bound)"),
    **status_variables(CELL),
}
"""Every variable updated cell by cell; ``done`` is written last."""

_FILL = {"float64": np.nan, "bool": False, "str": ""}


def empty_variables(
    variables: dict[str, Variable], coords: dict[str, np.ndarray]
) -> tuple[dict[str, xr.Variable], dict]:
    """Every variable filled with its missing value (NaN, False, ""), with ``units``,
    ``long_name`` and ``missing`` attributes, and its zarr encoding: one chunk per pair of
    the first two dims."""
    data, encoding = {}, {}
    for name, variable in variables.items():
        shape = tuple(coords[d].size for d in variable.dims)
        dtype = object if variable.dtype == "str" else variable.dtype
        attributes = {"units": variable.units, "long_name": variable.long_name}
        if variable.missing:
            attributes["missing"] = variable.missing
        data[name] = xr.Variable(
            variable.dims, np.full(shape, _FILL[variable.dtype], dtype), attributes
        )
        encoding[name] = {"chunks": (1, 1, *shape[2:])}
    return data, encoding


def kind_template(
    grid,
    variables: dict[str, Variable],
    attrs: dict,
    *,
    kind: str | None,
    long_names: dict[str, str],
    extra: dict[str, xr.Variable] | None = None,
) -> tuple[xr.Dataset, dict]:
    """The empty Dataset of a sweep and its encoding: ``variables`` and ``extra`` over
    ``grid.coords()``, each coordinate's ``long_name``; ``kind`` (training, coupled) names a
    sweep other than the methods sweep, whose store has no ``kind``."""
    coords = grid.coords()
    data_vars, encoding = empty_variables(variables, coords)
    data_vars.update(extra or {})
    dataset = xr.Dataset(
        data_vars,
        coords=coords,
        attrs={**attrs, "grid": grid.fingerprint(), "format": FORMAT}
        | ({"kind": kind} if kind else {}),
    )
    for name, text in long_names.items():
        dataset[name].attrs.update(units="1", long_name=text)
    return dataset, encoding


def _template(grid: Grid, attrs: dict) -> tuple[xr.Dataset, dict]:
    """The empty Dataset of ``grid`` and its zarr encoding."""
    in_grid = xr.Variable(
        ("family", "n_states", "method", "setting"),
        grid.in_grid,
        {
            "units": "1",
            "long_name": "the grid has this size for the family and setting for the method",
        },
    )
    meanings = ", ".join(f"{m}: {METHODS[m].SETTING}" for m in grid.methods)
    long_names = {
        "n_states": "number of hidden states",
        "method": "approximation method",
        "setting": f"the method's setting ({meanings})",
        "t": "time step",
    }
    return kind_template(
        grid, VARIABLES, attrs, kind=None, long_names=long_names, extra={"in_grid": in_grid}
    )


def check_format(attrs: dict, path) -> None:
    """Raise ``ConfigError`` for a store written in another layout (``FORMAT``)."""
    found = attrs.get("format", 1)
    if found != FORMAT:
        raise ConfigError(
            "store",
            f"{path} has layout {found}, this pipeline reads layout {FORMAT} (the method "
            "and setting dims; see the README's release notes); run the sweep again, with "
            "overwrite=true to replace it",
        )


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
    ``record_failure`` update the mirror, ``flush`` writes it. A sweep of
    another kind (``pipeline.sweep.training``) subclasses it with its own
    ``variables``, ``template`` and grid (``cells``, ``index``, ``fingerprint``
    and ``DIMS``, whose first two dims chunk the store).
    """

    variables: dict[str, Variable] = VARIABLES
    template = staticmethod(_template)

    def __init__(self, path: Path, grid: Grid, group: zarr.Group, arrays: dict[str, np.ndarray]):
        self.path, self.grid, self._group, self._arrays = path, grid, group, arrays
        self._dirty: set[tuple[int, int]] = set()

    @classmethod
    def check(cls, path: Path, grid: Grid, *, overwrite: bool = False) -> bool:
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
        current = group.attrs.get("format", 1) == FORMAT
        if not overwrite:
            check_format(dict(group.attrs), path)
        missing = sorted(set(cls.variables) - set(group.array_keys()))
        if missing and not overwrite:
            raise ConfigError(
                "store",
                f"{path} was written by an older version of the pipeline (it lacks "
                f"{', '.join(missing)}); pass overwrite=true to compute it again",
            )
        if stored == grid.fingerprint() and current and not missing:
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
            arrays = {name: np.asarray(group[name][...]) for name in cls.variables}
            store = cls(path, grid, group, arrays)
            store.update_attrs(runs=int(group.attrs.get("runs", 1)) + 1)
            return store
        if path.exists():
            shutil.rmtree(path)
        dataset, encoding = cls.template(grid, {**attrs, "runs": 1})
        dataset.to_zarr(path, mode="w", encoding=encoding, consolidated=False)
        _consolidate(path)
        arrays = {name: dataset[name].values.copy() for name in cls.variables}
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
        index = dict(zip(self.grid.DIMS, self.grid.index(cell), strict=True))
        for name, value in values.items():
            where = tuple(index[d] for d in self.variables[name].dims if d in index)
            self._arrays[name][where] = value
        self._set_status(cell, done=True, failed=False, error="")

    def record_failure(self, cell: Cell, message: str) -> None:
        self._set_status(cell, done=False, failed=True, error=message)

    def _set_status(self, cell: Cell, **status) -> None:
        position = self.grid.index(cell)
        for name, value in status.items():
            self._arrays[name][position] = value
        self._dirty.add(position[:2])

    def flush(self) -> None:
        """Write the chunks of every changed pair of the first two dims, ``done`` last."""
        for pair in sorted(self._dirty):
            for name in self.variables:
                self._group[name][pair] = self._arrays[name][pair]
        self._dirty.clear()

    def update_attrs(self, **attrs) -> None:
        """Set Dataset attributes (and refresh the consolidated metadata)."""
        self._group.attrs.update(attrs)
        _consolidate(self.path)
