"""Approximate inference in large hidden Markov models, swept on Dask.

Library: ``pipeline.models`` (the ``HMM`` container and model families),
``pipeline.operators`` (matrix formats), ``pipeline.methods`` (approximations: top-p,
top-k, belief pruning, low-rank), ``pipeline.inference``, ``pipeline.metrics``,
``pipeline.coupled`` (weakly coupled HMMs), ``pipeline.hmmlm`` (HMM language models);
``pipeline.plugins`` adds users' own families and methods. Experiments: ``python -m
pipeline.sweep`` or ``pipeline.sweep.run([...])``; results: ``pipeline.open_results(path)``
(what a store holds: ``pipeline.results``); reports: ``python -m pipeline.analyze`` or
``pipeline.analysis.analyze``; the ``pipeline`` command runs both (``pipeline sweep ...``,
``pipeline analyze ...``).
"""

from __future__ import annotations

import importlib
import importlib.metadata

try:
    __version__ = importlib.metadata.version("topp-pipeline")
except importlib.metadata.PackageNotFoundError:  # sources on the path, not installed
    __version__ = "unknown"

__all__ = ["open_results"]


def __getattr__(name: str):
    """``pipeline.open_results``, imported on first use (PEP 562): ``import pipeline`` loads
    neither xarray nor zarr, so the library below the store (``pipeline.hmm``,
    ``pipeline.inference``...) imports without them."""
    if name == "open_results":
        return importlib.import_module("pipeline.results").open_results
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
