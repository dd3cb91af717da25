"""``threshold``: drop every transition below ``setting`` times its row's largest, renormalise."""

import numpy as np
import scipy.sparse as sp

from pipeline.methods import Approximation
from pipeline.models import HMM
from pipeline.operators import toarray

SETTING = "tau"


def check(setting) -> None:
    if not 0 <= setting < 1:
        raise ValueError(f"tau must be in [0, 1), got {setting}")


def approximate(hmm: HMM, setting: float) -> Approximation:
    """Each row keeps its entries >= tau x its largest; its error TV(T_i, Q_i) is the mass
    it drops (renormalising moves exactly that much), so every bound the sweep stores holds."""
    T = toarray(hmm.transition)
    kept = np.where(T >= setting * T.max(axis=1, keepdims=True), T, 0.0)
    mass = kept.sum(axis=1)
    Q = sp.csr_array(kept / mass[:, None])
    return Approximation(HMM(hmm.prior, Q, hmm.emission), 1.0, 0.0, 1.0 - mass)
