"""Top-p approximate inference in large hidden Markov models, swept on Dask.

Library: ``pipeline.models``, ``pipeline.topp``, ``pipeline.inference``,
``pipeline.metrics``. Experiments: ``python -m pipeline.sweep``; results:
``pipeline.open_results(path)``.
"""

from __future__ import annotations

import xarray as xr

__version__ = "0.1.0"


def open_results(path) -> xr.Dataset:
    """The results Dataset of a sweep's zarr store (the same as ``xr.open_zarr(path)``)."""
    return xr.open_zarr(path)
