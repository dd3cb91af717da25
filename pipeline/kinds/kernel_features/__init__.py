"""The kernel-features kind: how many random features a softmax over n states needs
(a ``kernel_features`` section).

``KIND`` names its store's schema (``results``), its sweep and its report.
"""

from pipeline.kinds.kernel_features.results import SCHEMA
from pipeline.results.registry import Kind

KIND = Kind(
    SCHEMA,
    sweep="pipeline.kinds.kernel_features.sweep",
    report="pipeline.kinds.kernel_features.report:analyze",
)
