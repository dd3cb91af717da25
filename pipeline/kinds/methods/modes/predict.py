"""The ``predict`` mode: ``P(S_t)``, the forward recursion with nothing observed, whose
error Section 4's bounds and the online certificate bound."""

from __future__ import annotations

from pipeline.kinds.methods.modes.forward import Forward


class Predict(Forward):
    name = registered = "predict"
    title = "prediction"
    observed = False
    produces = frozenset({"tv", "certificate", "work", "zero_evidence"})
    line, line_name = "-", "solid"


MODE = Predict()
