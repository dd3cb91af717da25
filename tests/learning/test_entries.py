"""The M-step of a row-stochastic matrix's entries (``reestimate``) at the edges of floating
point: a state the posteriors all but never visit has subnormal counts."""

import numpy as np

from pipeline.learning.entries import reestimate

ROWS = np.repeat([0, 1], 3)
"""Two rows of three entries."""


def test_a_row_of_subnormal_counts_is_learnt_without_overflow():
    previous = np.array([0.2, 0.3, 0.5, 0.6, 0.3, 0.1])
    counts = np.array([3e-320, 1e-320, 0.0, 2.0, 1.0, 1.0])
    with np.errstate(all="raise"):
        exact = reestimate(previous, counts, None, ROWS)
        kept = reestimate(previous, counts, np.array([1, 1, 0, 1, 1, 1], bool), ROWS)
    np.testing.assert_allclose(exact, [0.75, 0.25, 0.0, 0.5, 0.25, 0.25], rtol=1e-3)
    np.testing.assert_allclose(kept[:3], [0.375, 0.125, 0.5], rtol=1e-3)  # 0.5 held, 0.5 shared
    np.testing.assert_allclose(np.bincount(ROWS, weights=kept), 1.0, rtol=1e-12)
