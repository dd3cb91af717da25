"""The training kind: HMM language models trained over state counts,
parameterisations and seeds, beside Kneser-Ney baselines (a ``training`` section).

``KIND`` names its store's schema (``results``), its sweep and its report.
"""

from pipeline.kinds.training.results import SCHEMA
from pipeline.results.registry import Kind

KIND = Kind(
    SCHEMA, sweep="pipeline.kinds.training.sweep", report="pipeline.kinds.training.report:analyze"
)
