"""Approximate inference in large hidden Markov models, swept on Dask.

Library: ``pipeline.models`` (the ``HMM`` container and model families),
``pipeline.operators`` (matrix formats), ``pipeline.methods`` (approximations: top-p,
top-k, belief pruning, low-rank), ``pipeline.inference``, ``pipeline.metrics``,
``pipeline.coupled`` (weakly coupled HMMs), ``pipeline.hmmlm`` (HMM language models);
``pipeline.plugins`` adds users' own families and methods. Experiments: ``python -m
pipeline.sweep`` or ``pipeline.sweep.run([...])``; results: ``pipeline.open_results(path)``
(what a store holds: ``pipeline.results``); reports: ``python -m pipeline.analyze`` or
``pipeline.analysis.analyze``.
"""

from __future__ import annotations

from pipeline.results import open_results

__version__ = "0.2.0"

__all__ = ["open_results"]
