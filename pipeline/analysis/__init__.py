"""Looking at a results Dataset: readings, figures, the paper comparison and the report.

``analyze(store)`` (or ``python -m pipeline.analyze <store>``) writes PNG figures
and a Markdown report next to any sweep's store; ``summary_table(ds)`` is the
table the sweep prints at its end.

- ``readings``: small readings shared by the rest (models, methods, medians, the
  top-p payoff fit, the cost-accuracy points and their Pareto front);
- ``figures``: one function per figure;
- ``paper``: the top-p paper's published numbers against a run;
- ``tables``: the sweep's summary table and the report's tables;
- ``report``: the report's sections and ``analyze``.
"""

from pipeline.analysis.report import analyze, default_output
from pipeline.analysis.tables import summary_table

__all__ = ["analyze", "default_output", "summary_table"]
