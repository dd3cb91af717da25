"""The ``filter`` mode: ``P(S_t | o_0..o_t)``, the forward recursion on a path sampled from
the exact model, observed at every ``observe_every``-th step."""

from __future__ import annotations

from pipeline.kinds.methods.modes.forward import Forward


class Filter(Forward):
    name = registered = "filter"
    title = "filtering"
    produces = frozenset({"tv", "work", "log_evidence", "log_evidence_error", "zero_evidence"})
    line, line_name = "--", "dashed"


MODE = Filter()
