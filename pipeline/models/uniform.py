"""The Uniform HMM of Section 5: the case least favourable to top-p."""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM

SEEDED = False
"""Every seed gives the same HMM."""


def check(n_states: int) -> None:
    """Every ``n_states >= 2`` is valid."""


def build(n_states: int, seed: int = 0) -> HMM:
    """Uniform prior, transitions and emissions over ``n_states`` states and observations.

    Every row is ``1 / n_states`` everywhere, so a top-p row keeps the first
    ``ceil(p * n_states)`` columns (ties go to the lower index) and sparsity is
    about ``1 - p``. ``seed`` is accepted for a uniform family signature and ignored.
    """
    uniform = np.full((n_states, n_states), 1.0 / n_states)
    return HMM(np.full(n_states, 1.0 / n_states), uniform, uniform)
