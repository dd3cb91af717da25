"""What a sweep's store holds, for any reader: the schema of every sweep kind and
``open_results``. Imports neither Hydra nor Dask.

A store is a zarr store that plain xarray reads (``xr.open_zarr(path)``); its attribute
``kind`` says which sweep wrote it (none: ``methods``), and each kind's ``results`` module
(``pipeline.kinds.<kind>.results``) lists its dims, every variable with its units, meaning
and why it may be NaN, and the summary table the sweep prints:

- ``methods``: approximation methods against exact inference (``python -m pipeline.sweep``);
- ``training``: HMM language models trained over sizes and transition parameterisations;
- ``coupled``: structured mean field and chain-wise Viterbi in weakly coupled HMMs;
- ``kernel_features``: random feature maps against the softmax they approximate;

and those installed packages add: ``KINDS`` (``registry``) maps every name to its
``Kind``, the registry every layer looks a kind up in. This package holds what every store
shares: the schema's parts (``schema``), the store's format and kind (``base``), the
files' durability (``durable``) and manifests (``manifest``), what a path holds
(``paths``) and the checks of its chunks (``verify``).

>>> from pipeline.results import schema
>>> schema("methods").variables["tv"].long_name
'total variation TV(P_t, Q_t) between exact and approximate beliefs'
"""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from pipeline.results.base import FORMAT, StoreError, kind_of
from pipeline.results.paths import Found, found, require_results
from pipeline.results.registry import KINDS, Kind, schema
from pipeline.results.schema import Schema, Variable, status_variables
from pipeline.results.verify import damage, damage_line


def open_results(path) -> xr.Dataset:
    """The results Dataset of a sweep's store, lazily (what ``xr.open_zarr(path)`` returns).

    Raises ``StoreError`` (one line: what the path holds and what to do) where ``path``
    holds no results store of this pipeline, or one written in another layout
    (``FORMAT``). Reading a store while a sweep writes it gives its finished cells.
    """
    path = Path(path)
    attrs = require_results(path)
    try:
        schema(kind_of(attrs))
    except ValueError:
        raise StoreError(
            f"{path} holds a {kind_of(attrs)!r} sweep; this pipeline reads "
            f"{', '.join(KINDS.names())}"
        ) from None
    ds = xr.open_zarr(path)
    ds.encoding["source"] = str(path)
    return ds


__all__ = [
    "FORMAT",
    "KINDS",
    "Found",
    "Kind",
    "Schema",
    "StoreError",
    "Variable",
    "damage",
    "damage_line",
    "found",
    "kind_of",
    "open_results",
    "require_results",
    "schema",
    "status_variables",
]
