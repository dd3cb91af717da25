"""What a sweep's store holds, for any reader: the schema of every sweep kind and
``open_results``. Imports neither Hydra nor Dask.

A store is a zarr store that plain xarray reads (``xr.open_zarr(path)``); its attribute
``kind`` says which sweep wrote it (none: ``methods``), and each kind's module here lists
its dims, every variable with its units, meaning and why it may be NaN, and the summary
table the sweep prints:

- ``methods``: approximation methods against exact inference (``python -m pipeline.sweep``);
- ``training``: HMM language models trained over sizes and transition parameterisations;
- ``coupled``: structured mean field and chain-wise Viterbi in weakly coupled HMMs;
- ``kernel_features``: random feature maps against the softmax they approximate.

>>> from pipeline.results import SCHEMAS
>>> SCHEMAS["methods"].variables["tv"].long_name
'total variation TV(P_t, Q_t) between exact and approximate beliefs'
"""

from __future__ import annotations

from pathlib import Path

import xarray as xr
import zarr

from pipeline.results import coupled, kernel_features, methods, training
from pipeline.results.base import (
    FORMAT,
    Schema,
    StoreError,
    Variable,
    check_format,
    is_store,
    kind_of,
    status_variables,
)

SCHEMAS: dict[str, Schema] = {
    module.SCHEMA.name: module.SCHEMA for module in (methods, training, coupled, kernel_features)
}
"""Sweep kind (a store's ``kind`` attribute) -> what its store holds."""


def open_results(path) -> xr.Dataset:
    """The results Dataset of a sweep's store, lazily (what ``xr.open_zarr(path)`` returns).

    Raises ``StoreError`` (one line: the path and what to do) where ``path`` holds no
    results store of this pipeline, or one written in another layout (``FORMAT``).
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path} does not exist; give the path of a sweep's results store")
    if not is_store(path):
        raise StoreError(f"{path} is not a zarr store; give the path of a sweep's results store")
    try:
        attrs = zarr.open_group(path, mode="r", use_consolidated=False).attrs.asdict()
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StoreError(f"{path} is not a readable zarr group ({error})") from None
    if "grid" not in attrs:
        raise StoreError(f"{path} is a zarr store but not a results store of this pipeline")
    check_format(attrs, path)
    if kind_of(attrs) not in SCHEMAS:
        raise StoreError(
            f"{path} holds a {kind_of(attrs)!r} sweep; this pipeline reads {', '.join(SCHEMAS)}"
        )
    ds = xr.open_zarr(path)
    ds.encoding["source"] = str(path)
    return ds


__all__ = [
    "FORMAT",
    "SCHEMAS",
    "Schema",
    "StoreError",
    "Variable",
    "check_format",
    "kind_of",
    "open_results",
    "status_variables",
]
