"""Top-p (Definitions 2 to 4 and Algorithm 1 of the top-p paper): keep each row's most
probable entries until their mass reaches ``p``, renormalise, store as CSR.

The top-p set of a distribution is the shortest prefix of its sorted order
(probabilities descending, ties broken by the lower index first) whose mass
reaches ``p``; the top-p distribution keeps that set and renormalises it by
its mass. A mass within ``TOLERANCE`` below ``p`` counts as reaching ``p``, so
that sums that equal ``p`` in exact arithmetic (the paper's examples) do.
``p = 1`` keeps every non-zero entry, as exact arithmetic does.

Guarantee: each row's error ``eps_i = 1 - kept mass <= 1 - p`` (Theorem 4.1),
so for prediction the error stays below ``(1 - p) / gamma`` (Theorem 4.3).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import HMM
from pipeline.kernels.select import TOLERANCE
from pipeline.methods.base import Approximation
from pipeline.methods.select import (
    MASS,
    kept_mass,
    mass_target,
    select_matrix,
    select_vector,
    selected,
)

SETTING = "p"
"""What the setting of this method is: the probability mass kept, in (0, 1]."""


def check(setting) -> None:
    """Raise ``TypeError`` or ``ValueError`` unless ``setting`` is a top-p mass in (0, 1]."""
    mass_target(setting)


def topp_vector(v, p) -> np.ndarray:
    """The top-p distribution of a probability vector (Algorithm 1).

    Parameters
    ----------
    v : array_like, shape (d,)
        A probability distribution (non-negative, summing to 1).
    p : float in (0, 1]
        The mass to keep.

    Returns
    -------
    ndarray, shape (d,)
        ``v`` on its top-p set divided by the set's mass, 0 elsewhere.

    >>> topp_vector([0.3, 0.25, 0.15, 0.2, 0.06, 0.04], 0.9).round(4)
    array([0.3333, 0.2778, 0.1667, 0.2222, 0.    , 0.    ])
    """
    return select_vector(v, MASS, mass_target(p))


def topp_matrix(P, p) -> sp.csr_array:
    """Every row's top-p distribution, as a CSR array with sorted indices.

    Parameters
    ----------
    P : ndarray, scipy sparse matrix or SparsePlusRankOne, shape (n, d)
        Row-stochastic (see ``pipeline.methods.select.select_matrix``).
    p : float in (0, 1]

    Returns
    -------
    csr_array, shape (n, d)
        Row ``i`` is ``topp_vector(P[i], p)``, with no stored zeros.
    """
    return select_matrix(P, MASS, mass_target(p))


def topp_hmm(hmm: HMM, p) -> HMM:
    """The top-p HMM of ``hmm`` (Definition 4).

    The prior, every transition row and every emission row are replaced by
    their top-p distributions; transition and emission become CSR arrays, the
    prior stays a dense vector.
    """
    mass_target(p)
    return HMM(
        topp_vector(hmm.prior, p), topp_matrix(hmm.transition, p), topp_matrix(hmm.emission, p)
    )


def approximate(hmm: HMM, setting: float) -> Approximation:
    """The top-p HMM with ``p = setting``, and its prior and row errors."""
    return selected(hmm, topp_hmm(hmm, setting))


__all__ = [
    "SETTING",
    "TOLERANCE",
    "approximate",
    "check",
    "kept_mass",
    "topp_hmm",
    "topp_matrix",
    "topp_vector",
]
