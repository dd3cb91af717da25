"""Approximate inference in large hidden Markov models, swept on Dask.

Library: ``pipeline.models`` (the ``HMM`` container and model families),
``pipeline.operators`` (matrix formats), ``pipeline.methods`` (approximations:
top-p, top-k, belief pruning; ``pipeline.topp`` is top-p's short name),
``pipeline.inference``, ``pipeline.metrics``. Experiments: ``python -m
pipeline.sweep`` (``pipeline.sweep``); results: ``pipeline.open_results(path)``;
reports: ``python -m pipeline.analyze`` (``pipeline.analysis``).
"""

from __future__ import annotations

import xarray as xr

__version__ = "0.2.0"


def open_results(path) -> xr.Dataset:
    """The results Dataset of a sweep's zarr store (the same as ``xr.open_zarr(path)``)."""
    return xr.open_zarr(path)
