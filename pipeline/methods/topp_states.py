"""Top-p states (belief pruning): exact transitions, but after every step only the
belief's most probable states are kept until their mass reaches ``p``.

The variant of top-p that prunes the belief instead of the matrix: the next
step then reads only the rows of the kept states (``filtering(..., prune=p)``).
The top-p paper's later version reports it slower than top-p transitions;
``experiment=methods`` measures whether that holds here.

Guarantee (prediction): pruning a distribution that sums to 1 down to a set
of mass at least ``p`` and renormalising moves it by ``1 - kept <= 1 - p`` in
TV (the proof of Theorem 4.1), and an exact step contracts any TV by
``1 - gamma`` (Theorem 4.2). With ``P_t`` exact and ``Q_t = prune(Q_{t-1} T)``:

    TV(P_t, Q_t) <= TV(P_{t-1} T, Q_{t-1} T) + TV(Q_{t-1} T, Q_t)
                 <= (1 - gamma) TV(P_{t-1}, Q_{t-1}) + (1 - p),

the recursion behind Theorem 4.3 with ``1 - p`` per step, so the error stays
below ``(1 - p) / gamma``; the run's own pruned masses give the online
certificate.
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.methods.base import Approximation
from pipeline.methods.topp import check

SETTING = "p"
"""What the setting of this method is: the belief mass kept after every step, in (0, 1]."""


def approximate(hmm: HMM, setting: float) -> Approximation:
    """The exact model with belief pruning at ``p = setting``."""
    check(setting)
    return Approximation(
        hmm, prune=float(setting), prior_error=0.0, row_error=np.zeros(hmm.n_states)
    )


__all__ = ["SETTING", "approximate", "check"]
