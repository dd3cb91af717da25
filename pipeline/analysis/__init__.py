"""Looking at a results Dataset: figures and a Markdown report of any sweep's store.

``analyze(store_or_dataset)`` (or ``python -m pipeline.analyze <store>``) writes PNG
figures and a report next to the store, by its kind (``pipeline.kinds.KINDS``): ``methods``
(the approximation methods), ``training`` (HMM LMs) and ``coupled`` (weakly coupled
HMMs), one module each. Shared by the methods report:

- ``readings``: small readings (labels, the top-p payoff fit, the cost-accuracy points
  and their Pareto front);
- ``figures``: one function per figure;
- ``paper``: the top-p paper's published numbers against a run;
- ``tables``: the report's Markdown tables.

Imports neither Hydra nor Dask's scheduler: what a store holds is ``pipeline.results``.
"""

from pipeline.analysis.figures import Analysis
from pipeline.analysis.report import analyze, default_output

__all__ = ["Analysis", "analyze", "default_output"]
