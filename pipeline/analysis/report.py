"""``analyze``: any sweep's store to figures and a Markdown report, by the store's kind."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from pipeline.analysis import coupled, kernel_features, methods, training
from pipeline.analysis.figures import Analysis
from pipeline.results import kind_of, open_results

REPORTS = {
    "methods": methods.analyze,
    "training": training.analyze,
    "coupled": coupled.analyze,
    "kernel_features": kernel_features.analyze,
}
"""Sweep kind (a store's ``kind`` attribute) -> the function that writes its report."""


def default_output(store: Path) -> Path:
    """Where ``analyze`` writes by default: ``<store's folder>/<store name>_report/``."""
    store = Path(store)
    return store.parent / f"{store.stem}_report"


def _source(ds: xr.Dataset) -> Path | None:
    """The store a Dataset was opened from (``pipeline.open_results`` records it)."""
    source = ds.encoding.get("source")
    return Path(source) if source else None


def analyze(results, out=None) -> Analysis:
    """Write the figures and the Markdown report of a sweep's results; what it wrote.

    ``results`` is a store's path or its Dataset (as ``pipeline.sweep.run`` or
    ``pipeline.open_results`` return it). ``out`` defaults to a folder next to the store
    (``default_output``); a Dataset with no store behind it needs one. Raises
    ``StoreError`` (one line) where the path holds no results store this pipeline reads.
    """
    if isinstance(results, xr.Dataset):
        ds, store = results, _source(results)
        if out is None and store is None:
            raise ValueError("out: this Dataset has no store behind it; give out=<folder>")
    else:
        store = Path(results)
        ds = open_results(store)
    out = Path(out) if out is not None else default_output(store)
    out.mkdir(parents=True, exist_ok=True)
    return REPORTS[kind_of(ds.attrs)](ds.load(), store or out, out)
