"""The learning kind: EM with an approximate E-step against exact EM, from the same start on
the same data (a ``learning`` section).

``KIND`` names its store's schema (``results``), its sweep and its report.
"""

from pipeline.kinds.learning.results import SCHEMA
from pipeline.results.registry import Kind

KIND = Kind(
    SCHEMA,
    sweep="pipeline.kinds.learning.sweep",
    report="pipeline.kinds.learning.report:analyze",
)
