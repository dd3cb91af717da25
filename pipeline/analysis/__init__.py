"""Looking at a results Dataset: figures and a Markdown report of any sweep's store.

``analyze(store_or_dataset)`` (or ``python -m pipeline.analyze <store>``) writes PNG
figures and a report next to the store, by its kind (``pipeline.results.registry.KINDS``):
each kind's ``report`` (``pipeline.kinds.<kind>.report``) writes them; ``report`` finds it
and checks the store and the output folder first, ``base`` holds what every kind's report
shares.

Imports neither Hydra nor Dask's scheduler: what a store holds is ``pipeline.results``.
"""

from pipeline.analysis.base import Analysis
from pipeline.analysis.report import analyze, default_output

__all__ = ["Analysis", "analyze", "default_output"]
