"""Top-k transitions alone: each transition row keeps its ``k`` most probable entries
(``topk``'s rule), with the prior and the emissions kept exact.

``topk`` applies the rule to the prior, the transitions and the emissions, as Definition 4
of the top-p paper does for top-p, so an observed symbol beyond every state's ``k`` kept
emissions makes a sequence impossible. This variant truncates only the transitions; beside
``topk`` in one sweep it tells how much of ``topk``'s error comes from the emissions.

Guarantee: none a priori, as ``topk``; the method-neutral bounds hold with the measured
``max_i eps_i``, with no prior error.
"""

from __future__ import annotations

from pipeline.hmm import HMM
from pipeline.methods.base import Approximation
from pipeline.methods.select import transitions_alone
from pipeline.methods.topk import check, topk_matrix

SETTING = "k"
"""What the setting of this method is: the entries each transition row keeps, an integer >= 1."""


def approximate(hmm: HMM, setting: float) -> Approximation:
    """``hmm`` with every transition row replaced by its top-k distribution (CSR) at
    ``k = setting``; prior and emissions the exact ones."""
    check(setting)
    return transitions_alone(hmm, topk_matrix(hmm.transition, setting))


__all__ = ["SETTING", "approximate", "check"]
