"""What a new store holds before any cell is done: every variable of its kind's schema
empty (NaN, False, "") with its attributes and chunks, the grid's coordinates, and the
grid's identity in the attributes (``template``). No I/O: ``store.ResultStore`` writes it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from zarr.codecs import Crc32cCodec, ZstdCodec

from pipeline.results import FORMAT
from pipeline.results.schema import Schema, Variable
from pipeline.sweep.kind import Grid
from pipeline.sweep.timing import WARMUP

FILL = {"float64": np.nan, "bool": False, "str": ""}
"""The value of a variable where no cell is done, by its dtype."""
COMPRESSORS = (ZstdCodec(level=0, checksum=False), Crc32cCodec())
"""Every array's chunks: zstd as zarr's default, then a CRC32C checksum of the stored bytes."""


def empty_variables(
    variables: dict[str, Variable], coords: dict[str, np.ndarray]
) -> tuple[dict[str, xr.Variable], dict]:
    """Every variable filled with its missing value (NaN, False, ""), with ``units``,
    ``long_name``, ``missing`` and (a timed one) ``warmup`` attributes, and its zarr
    encoding: one chunk per pair of the first two dims."""
    data, encoding = {}, {}
    for name, variable in variables.items():
        shape = tuple(coords[d].size for d in variable.dims)
        dtype = object if variable.dtype == "str" else variable.dtype
        attributes = {"units": variable.units, "long_name": variable.long_name}
        if variable.missing:
            attributes["missing"] = variable.missing
        if variable.timed:
            attributes["warmup"] = WARMUP
        data[name] = xr.Variable(
            variable.dims, np.full(shape, FILL[variable.dtype], dtype), attributes
        )
        encoding[name] = {"chunks": (1, 1, *shape[2:]), "compressors": COMPRESSORS}
    return data, encoding


def template(schema: Schema, grid: Grid, attrs: dict) -> tuple[xr.Dataset, dict]:
    """The empty Dataset of a sweep of ``schema``'s kind over ``grid``, and its encoding:
    every variable over ``grid.coords()``, ``in_grid`` where the schema has it, each
    coordinate's ``long_name``, and the attributes ``grid`` (the fingerprint), ``format``
    and ``kind`` (read as the default kind where a store from before has none); ``done``
    keeps the fingerprint too (``identify``)."""
    coords = grid.coords()
    data_vars, encoding = empty_variables(schema.variables, coords)
    if schema.in_grid_dims:
        data_vars["in_grid"] = xr.Variable(
            schema.in_grid_dims,
            grid.in_grid(schema.in_grid_dims),
            {"units": "1", "long_name": schema.in_grid_name},
        )
    dataset = xr.Dataset(
        data_vars,
        coords=coords,
        attrs={**attrs, "grid": grid.fingerprint(), "format": FORMAT, "kind": schema.name},
    )
    for name, text in {**schema.coordinates, **grid.long_names()}.items():
        dataset[name].attrs.update(units="1", long_name=text)
    for variable in dataset.variables:
        encoding.setdefault(variable, {"compressors": COMPRESSORS})
    return identify(dataset, grid), encoding


def identify(dataset: xr.Dataset, grid: Grid) -> xr.Dataset:
    """``dataset`` with the grid's fingerprint in its ``done`` array's attributes too: a
    store whose root metadata is lost keeps its identity there
    (``pipeline.results.paths.identity``)."""
    dataset["done"].attrs["grid"] = grid.fingerprint()
    return dataset
