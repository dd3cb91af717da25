"""Top-p transitions alone: the transition rows' top-p distributions (Definition 3 of the
top-p paper, row by row), with the prior and the emissions kept exact.

Definition 4 (``topp``) truncates the prior, the transitions and the emissions. Under
filtering, smoothing and learning the truncated emissions rule observed symbols out: a
symbol beyond an emission row's top-p set has probability 0 in that state, and one beyond
every state's set makes the whole sequence impossible (log-likelihood -inf). This variant
changes only what makes a step cost O(n^2), so the error it adds is the transitions' alone;
beside ``topp`` in one sweep it tells how much of ``topp``'s error comes from the emissions.

Guarantee: as ``topp`` (each row's ``eps_i <= 1 - p``, prediction TV below
``(1 - p) / gamma``, Theorem 4.3), with no prior error.
"""

from __future__ import annotations

from pipeline.hmm import HMM
from pipeline.methods.base import Approximation
from pipeline.methods.select import transitions_alone
from pipeline.methods.topp import check, topp_matrix

SETTING = "p"
"""What the setting of this method is: the mass each transition row keeps, in (0, 1]."""


def approximate(hmm: HMM, setting: float) -> Approximation:
    """``hmm`` with every transition row replaced by its top-p distribution (CSR) at
    ``p = setting``; prior and emissions the exact ones."""
    check(setting)
    return transitions_alone(hmm, topp_matrix(hmm.transition, setting))


__all__ = ["SETTING", "approximate", "check"]
