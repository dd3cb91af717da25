"""Random feature maps against the softmax: the kernel rows of every feature count against
a direct sum over the features, their errors, and convergence to the softmax."""

import numpy as np
import pytest

from pipeline.hmmlm.feature_maps import embeddings, kernel_rows, row_errors, softmax_rows

COUNTS = (2, 8, 32)


def _direct(e, feature_map, F, seed):
    """The kernel row entries phi_F(u) . phi_F(v) written out, with the same draws."""
    rng = np.random.default_rng(seed)
    d = e.U.shape[1]
    if feature_map == "positive":
        W = rng.standard_normal((max(COUNTS), d))[:F]

        def phi(x):
            return np.exp(W @ x - x @ x / 2)
    else:
        W = rng.standard_normal((max(COUNTS) // 2, d))[: F // 2]

        def phi(x):
            return np.exp(x @ x / 2) * np.r_[np.cos(W @ x), np.sin(W @ x)]

    return np.array([[phi(u) @ phi(v) for v in e.V] for u in e.U])


@pytest.mark.parametrize("feature_map", ["positive", "fourier"])
def test_each_count_is_the_kernel_of_the_first_features(feature_map):
    e = embeddings(40, 3, 1.0, 5, np.random.default_rng(0))
    rows = kernel_rows(e, feature_map, COUNTS, np.random.default_rng(7), block=16)
    for k, F in enumerate(COUNTS):
        direct = _direct(e, feature_map, F, 7)
        ratio = rows[k] / direct  # one positive factor per row
        np.testing.assert_allclose(ratio, ratio[:, :1] * np.ones_like(ratio), rtol=1e-9)
        assert (ratio > 0).all()


@pytest.mark.parametrize("feature_map", ["positive", "fourier"])
def test_many_features_approach_the_softmax(feature_map):
    """Soft rows (temperature 4): the median row TV falls with F and is small at F = 4096."""
    e = embeddings(300, 8, 4.0, 20, np.random.default_rng(1))
    counts = (16, 256, 4096)
    errors = row_errors(
        softmax_rows(e), kernel_rows(e, feature_map, counts, np.random.default_rng(2))
    )
    assert errors.median[0] > errors.median[1] > errors.median[2] and errors.median[2] < 0.03
    assert (errors.p90 >= errors.median).all()
    assert (errors.negative == 0).all() if feature_map == "positive" else errors.negative[0] >= 0


def test_row_errors_by_hand():
    exact = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    kernel = np.array(
        [
            [[1.0, 1.0, 0.0], [2.0, 3.0, 5.0]],  # both rows exact, up to a factor
            [[1.0, 0.0, 1.0], [1.0, -1.0, 0.0]],  # TV 1/2; a row summing to zero
        ]
    )
    errors = row_errors(exact, kernel)
    np.testing.assert_allclose(errors.median[0], 0.0, atol=1e-15)
    assert errors.median[1] == np.inf and errors.p90[1] == np.inf
    np.testing.assert_allclose(errors.negative, [0.0, 1 / 6])
    assert row_errors(exact[:1], kernel[1:, :1]).median[0] == pytest.approx(0.5)
