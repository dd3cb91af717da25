"""The coupled kind: structured mean field and chain-wise Viterbi against exact
inference and top-p in weakly coupled HMMs (a ``coupled`` section).

``KIND`` names its store's schema (``results``), its sweep and its report.
"""

from pipeline.kinds.coupled.results import SCHEMA
from pipeline.results.registry import Kind

KIND = Kind(
    SCHEMA, sweep="pipeline.kinds.coupled.sweep", report="pipeline.kinds.coupled.report:analyze"
)
