"""The methods kind (the default): approximation methods against exact inference,
cell by cell, over the keys of its section ``methods`` (``methods.grid``, ``methods.model``,
``methods.timing``, ...).

``KIND`` names its store's schema (``results``), its sweep and its report.
"""

from pipeline.kinds.methods.results import SCHEMA
from pipeline.results.registry import Kind

KIND = Kind(
    SCHEMA, sweep="pipeline.kinds.methods.sweep", report="pipeline.kinds.methods.report:analyze"
)
