"""Top-k: keep each row's ``k`` most probable entries, renormalise, store as CSR.

The alternative to top-p that the top-p paper cites (Vithanage, Andrieu and
Piechocki 2006, who keep the k most probable transitions): it fixes the
number of entries instead of their mass. The kept set is the first ``k``
non-zero entries of Algorithm 1's order (probabilities descending, ties to the
lower index), so ``k`` at least a row's non-zero count keeps the whole row.
As Definition 4 does for top-p, the top-k HMM applies the rule to the prior,
every transition row and every emission row, so the two methods differ only
in the rule.

Guarantee: none a priori (a row's error ``eps_i`` is the mass beyond its k
largest entries, which ``k`` alone does not bound); the method-neutral bounds
hold with the measured ``max_i eps_i``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import HMM
from pipeline.methods.base import Approximation
from pipeline.methods.select import COUNT, count_target, select_matrix, select_vector, selected

SETTING = "k"
"""What the setting of this method is: the entries each row keeps, an integer >= 1."""


def check(setting) -> None:
    """Raise ``TypeError`` or ``ValueError`` unless ``setting`` is an integer >= 1."""
    count_target(setting)


def topk_vector(v, k) -> np.ndarray:
    """The top-k distribution of a probability vector ``v`` (d,): its ``k`` largest
    entries (ties to the lower index) renormalised, 0 elsewhere.

    >>> topk_vector([0.3, 0.25, 0.15, 0.2, 0.06, 0.04], 2).round(4)
    array([0.5455, 0.4545, 0.    , 0.    , 0.    , 0.    ])
    """
    return select_vector(v, COUNT, count_target(k))


def topk_matrix(P, k) -> sp.csr_array:
    """Every row's top-k distribution of ``P`` (any format, (n, d)), as CSR with sorted indices."""
    return select_matrix(P, COUNT, count_target(k))


def topk_hmm(hmm: HMM, k) -> HMM:
    """The top-k HMM of ``hmm``: prior, transition rows and emission rows each keep ``k``."""
    count_target(k)
    return HMM(
        topk_vector(hmm.prior, k), topk_matrix(hmm.transition, k), topk_matrix(hmm.emission, k)
    )


def approximate(hmm: HMM, setting: float) -> Approximation:
    """The top-k HMM with ``k = setting``, and its prior and row errors."""
    return selected(hmm, topk_hmm(hmm, setting))
