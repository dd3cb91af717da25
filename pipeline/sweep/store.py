"""The results store: one zarr store per sweep, an xarray Dataset over the grid.

Only one sweep writes a store (it holds ``pipeline.sweep.lock.StoreLock``), from its
client process: the store is created aside from a template and renamed into place, so no
interruption leaves a half-made store; the client keeps a mirror of every variable in
memory, and ``flush`` writes whole chunks of the pairs of the first two dims whose cells
changed, the ``done`` mask last. zarr's local store writes each chunk to a temporary file
and renames it into place, so an interrupted flush leaves every chunk either old or new;
cells whose ``done`` flag did not reach the disk are simply computed again on the next run.
Every chunk carries a CRC32C checksum: a chunk damaged on disk fails to read instead of
decoding into other numbers, and resuming computes its cells again.

Read it with plain xarray: ``xr.open_zarr(path)``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from pipeline.results import FORMAT, Found, Schema, Variable, found
from pipeline.results.base import DEFAULT_KIND
from pipeline.results.paths import problem
from pipeline.sweep.config import ConfigError
from pipeline.sweep.kinds.base import Grid

_FILL = {"float64": np.nan, "bool": False, "str": ""}
COMPRESSORS = (ZstdCodec(level=0, checksum=False), Crc32cCodec())
"""Every array's chunks: zstd as zarr's default, then a CRC32C checksum of the stored bytes."""
log = logging.getLogger("pipeline.sweep")


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
        encoding[name] = {"chunks": (1, 1, *shape[2:]), "compressors": COMPRESSORS}
    return data, encoding


def template(schema: Schema, grid: Grid, attrs: dict) -> tuple[xr.Dataset, dict]:
    """The empty Dataset of a sweep of ``schema``'s kind over ``grid``, and its encoding:
    every variable over ``grid.coords()``, ``in_grid`` where the schema has it, each
    coordinate's ``long_name``, and the attributes ``grid`` (the fingerprint), ``format``
    and ``kind`` (none for the default kind, whose stores never had one)."""
    coords = grid.coords()
    data_vars, encoding = empty_variables(schema.variables, coords)
    if schema.in_grid_dims:
        data_vars["in_grid"] = xr.Variable(
            schema.in_grid_dims,
            grid.in_grid(schema.in_grid_dims),
            {"units": "1", "long_name": schema.in_grid_name},
        )
    kind = {} if schema.name == DEFAULT_KIND else {"kind": schema.name}
    dataset = xr.Dataset(
        data_vars,
        coords=coords,
        attrs={**attrs, "grid": grid.fingerprint(), "format": FORMAT} | kind,
    )
    for name, text in {**schema.coordinates, **grid.long_names()}.items():
        dataset[name].attrs.update(units="1", long_name=text)
    for name in dataset.variables:
        encoding.setdefault(name, {"compressors": COMPRESSORS})
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


def _read(
    group: zarr.Group, dataset: xr.Dataset, schema: Schema
) -> tuple[dict[str, np.ndarray], set[tuple[int, int]]]:
    """Every variable of ``schema`` read chunk by chunk (one chunk per pair of the first two
    dims), and the pairs with a chunk that could not be read: those keep the template's
    missing values (``done`` false)."""
    arrays = {name: dataset[name].values.copy() for name in schema.variables}
    shape = arrays["done"].shape[:2]
    unread = set()
    for pair in np.ndindex(shape):
        try:
            chunk = {name: np.asarray(group[name][pair]) for name in schema.variables}
        except Exception:  # whatever a damaged chunk makes its codecs raise
            unread.add(pair)
            continue
        for name, values in chunk.items():
            arrays[name][pair] = values
    return arrays, unread


def _rewrite_damaged_coordinates(group: zarr.Group, dataset: xr.Dataset, schema: Schema) -> None:
    """Rewrite from the grid's template every array outside ``schema``'s variables
    (coordinates, ``in_grid``) that cannot be read."""
    for name in dataset.variables:
        if name in schema.variables:
            continue
        try:
            np.asarray(group[name][...])
        except Exception:  # whatever a damaged chunk makes its codecs raise
            group[name][...] = dataset[name].values
            log.warning("%s: %s could not be read; rewritten from the grid", group.store, name)


class ResultStore:
    """The store of one sweep, with an in-memory mirror of every cell variable.

    Use ``ResultStore.open`` to create or resume; ``record`` and
    ``record_failure`` update the mirror, ``flush`` writes it. Any kind's store: the
    ``schema`` names the variables, the grid the cells (``cells``, ``index``,
    ``fingerprint`` and ``DIMS``, whose first two dims chunk the store).
    """

    def __init__(
        self,
        path: Path,
        schema: Schema,
        grid: Grid,
        group: zarr.Group,
        arrays: dict[str, np.ndarray],
    ):
        self.path, self.schema, self.grid = path, schema, grid
        self.variables: dict[str, Variable] = schema.variables
        self._group, self._arrays = group, arrays
        self._dirty: set[tuple[int, int]] = set()

    @staticmethod
    def check(path: Path, schema: Schema, grid: Grid, *, overwrite: bool = False) -> bool:
        """Whether ``path`` holds a store of ``grid`` to resume; reads, never writes.

        Raises ``ConfigError`` (one line, the words ``analyze`` uses) when ``path`` holds
        something else: anything but a results store always; a half-made or unreadable
        store, one of an older layout or of another grid unless ``overwrite`` replaces it.
        """
        path = Path(path)
        what = found(path)
        if what in (Found.MISSING, Found.EMPTY):
            return False
        replaceable = (Found.HALF_MADE, Found.UNREADABLE, Found.OLD)
        if what is not Found.RESULTS and (what not in replaceable or not overwrite):
            raise ConfigError("store", problem(path, what))
        if what is not Found.RESULTS:
            return False
        group = zarr.open_group(path, mode="r", use_consolidated=False)
        stored = group.attrs["grid"]
        missing = sorted(set(schema.variables) - set(group.array_keys()))
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
    def open(
        cls, path: Path, schema: Schema, grid: Grid, attrs: dict, *, overwrite: bool = False
    ) -> ResultStore:
        """Resume the store of ``grid`` at ``path``, or create it (see ``check``).

        Resuming reads the store chunk by chunk: the cells of a chunk that cannot be read
        are not done (they are computed again, and the chunk rewritten at the next flush),
        and coordinates that cannot be read are rewritten from the grid."""
        path = Path(path)
        if not cls.check(path, schema, grid, overwrite=overwrite):
            return cls._create(path, schema, grid, attrs)
        dataset, _ = template(schema, grid, {})
        group = zarr.open_group(path, mode="r+", use_consolidated=False)
        arrays, unread = _read(group, dataset, schema)
        store = cls(path, schema, grid, group, arrays)
        store._dirty = unread  # rewritten, not done, at the first flush
        if unread:
            axes = grid.axes()
            where = "; ".join(
                ", ".join(f"{dim}={axes[dim][k]}" for dim, k in zip(grid.DIMS, pair, strict=False))
                for pair in sorted(unread)
            )
            log.warning(
                "%s: chunks of %s cannot be read; their cells are computed again", path, where
            )
        _rewrite_damaged_coordinates(group, dataset, schema)
        store.update_attrs(runs=int(group.attrs.get("runs", 1)) + 1)
        return store

    @classmethod
    def _create(cls, path: Path, schema: Schema, grid: Grid, attrs: dict) -> ResultStore:
        """A new store: written beside ``path`` and renamed into place (replacing what
        ``check`` allowed to replace), so no interruption leaves a half-made store."""
        dataset, encoding = template(schema, grid, {**attrs, "runs": 1})
        aside = path.with_name(f".{path.name}.{os.getpid()}.creating")
        if aside.exists():
            shutil.rmtree(aside)
        dataset.to_zarr(aside, mode="w", encoding=encoding, consolidated=False)
        _consolidate(aside)
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        aside.rename(path)
        arrays = {name: dataset[name].values.copy() for name in schema.variables}
        group = zarr.open_group(path, mode="r+", use_consolidated=False)
        return cls(path, schema, grid, group, arrays)

    def todo(self) -> list:
        """The cells of the grid not yet done, in grid order."""
        done = self._arrays["done"]
        return [cell for cell in self.grid.cells() if not done[self.grid.index(cell)]]

    @property
    def n_done(self) -> int:
        return int(self._arrays["done"].sum())

    @property
    def n_failed(self) -> int:
        return int(self._arrays["failed"].sum())

    def record(self, cell, values: dict) -> None:
        """Put a finished cell's ``values`` (variable name -> value) in the mirror."""
        index = dict(zip(self.grid.DIMS, self.grid.index(cell), strict=True))
        for name, value in values.items():
            where = tuple(index[d] for d in self.variables[name].dims if d in index)
            self._arrays[name][where] = value
        self._set_status(cell, done=True, failed=False, error="")

    def record_failure(self, cell, message: str) -> None:
        self._set_status(cell, done=False, failed=True, error=message)

    def _set_status(self, cell, **status) -> None:
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
