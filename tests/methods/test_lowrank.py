"""Low-rank and banded + low-rank fits: exact where the model has that structure, row sums
kept, the band kept, and a clear error where the fit cannot read the matrix."""

import numpy as np
import pytest

from pipeline.methods import approximate, lowrank
from pipeline.methods.banded_lowrank import DELTA
from pipeline.models import build_model
from pipeline.operators import LowRank, toarray
from pipeline.testing.random_models import random_hmm


def test_a_model_of_rank_r_is_recovered_at_rank_r():
    hmm = build_model("kernel", 60, n_features=3)
    approximation = approximate(hmm, "lowrank", 3)
    assert approximation.row_error.max() < 1e-3
    assert isinstance(approximation.hmm.transition, LowRank)
    assert approximation.hmm.transition.rank == 3
    # Rank one cannot express it: the fit is then far off.
    assert approximate(hmm, "lowrank", 1).row_error.max() > 0.1


def test_the_fit_keeps_the_row_sums():
    """Ho and Van Dooren: the KL-NMF updates keep the row sums of T, so W H is stochastic."""
    T = toarray(random_hmm(4, 30, 3).transition)
    W, H = lowrank.fit(T, 5)
    np.testing.assert_allclose((W @ H).sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(H.sum(axis=1), 1.0, atol=1e-12)
    assert (W >= 0).all() and (H >= 0).all()


def test_more_rank_fits_better():
    T = toarray(build_model("dirichlet", 40, alpha=0.3).transition)
    errors = []
    for r in (1, 4, 16, 40):
        W, H = lowrank.fit(T, r)
        errors.append(lowrank.row_errors(T, W @ H).mean())
    assert errors == sorted(errors, reverse=True)
    assert errors[-1] < 0.1 < 0.5 < errors[0]


def test_banded_lowrank_keeps_the_band_and_recovers_a_banded_kernel():
    hmm = build_model("banded_kernel", 50, n_features=2, delta=DELTA)
    T = toarray(hmm.transition)
    approximation = approximate(hmm, "banded_lowrank", 2)
    Q = toarray(approximation.hmm.transition)
    band = np.abs(np.subtract.outer(np.arange(50), np.arange(50))) < DELTA
    np.testing.assert_array_equal(Q[band], T[band])
    assert approximation.row_error.max() < 1e-3
    # Without the band, the same rank cannot express it.
    assert approximate(hmm, "lowrank", 2).row_error.mean() > 0.1


def test_a_model_too_large_to_read_is_a_one_line_error():
    hmm = build_model("kernel", 6000, n_features=2)
    with pytest.raises(ValueError, match=r"reads the whole 6000 x 6000 transition matrix"):
        approximate(hmm, "lowrank", 2)
