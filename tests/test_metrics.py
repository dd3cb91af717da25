import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from pipeline.inference import predict
from pipeline.metrics import (
    doeblin_lower_bound,
    minimal_mixing_rate,
    sparsity,
    total_variation,
    tv_bounds,
)
from pipeline.models import HMM, build_model
from pipeline.topp import topp_hmm

from helpers import random_stochastic


def brute_force_gamma(T):
    T = T.toarray() if sp.issparse(T) else T
    n = len(T)
    return min(np.minimum(T[i], T[k]).sum() for i in range(n) for k in range(n) if i != k)


def test_total_variation():
    assert total_variation([1, 0, 0], [0, 0.5, 0.5]) == 1.0
    assert total_variation([0.5, 0.5], [0.5, 0.5]) == 0.0
    np.testing.assert_allclose(total_variation(np.eye(3), [0.2, 0.3, 0.5]), [0.8, 0.7, 0.5])


@given(
    st.integers(2, 25),
    st.integers(1, 30),
    st.floats(0, 0.95),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1, 2, 3]),
)
def test_gamma_equals_brute_force(n, d, zeros, seed, threads):
    T = random_stochastic(np.random.default_rng(seed), n, d, zeros)
    expected = brute_force_gamma(T)
    assert minimal_mixing_rate(T, threads=threads) == pytest.approx(expected, abs=1e-12)
    assert minimal_mixing_rate(sp.csr_array(T), threads=threads) == pytest.approx(
        expected, abs=1e-12
    )
    assert doeblin_lower_bound(T) <= expected + 1e-12
    assert doeblin_lower_bound(sp.csr_array(T)) == pytest.approx(doeblin_lower_bound(T))


def test_gamma_needs_more_than_600_columns_to_prune():
    # Long rows exercise the chunked pruning; two rows with disjoint supports give gamma = 0.
    T = random_stochastic(np.random.default_rng(1), 40, 700)
    assert minimal_mixing_rate(T) == pytest.approx(brute_force_gamma(T), abs=1e-12)
    T[3] = 0.0
    T[3, 0] = 1.0
    T[5, 0] = 0.0
    T[5] /= T[5].sum()
    assert minimal_mixing_rate(T) == 0.0


def test_gamma_of_known_matrices():
    assert minimal_mixing_rate(np.full((800, 800), 1 / 800)) == pytest.approx(1.0, abs=1e-12)
    assert doeblin_lower_bound(np.full((5, 5), 0.2)) == pytest.approx(1.0)
    assert minimal_mixing_rate(np.eye(4)) == 0.0
    assert minimal_mixing_rate(sp.identity(4, format="csr")) == 0.0
    bell = build_model("bell", 60).transition
    assert minimal_mixing_rate(bell) == pytest.approx(brute_force_gamma(bell), abs=1e-12)
    with pytest.raises(ValueError, match=">= 2 rows"):
        minimal_mixing_rate(np.ones((1, 1)))


def test_tv_bounds_values():
    bounds = tv_bounds(0.9, 0.5, np.arange(4))
    np.testing.assert_allclose(bounds["single_step"], [0.1] * 4)
    np.testing.assert_allclose(bounds["linear"], [0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(bounds["mixing"], [0.2] * 4)
    np.testing.assert_allclose(bounds["recursive"], [0.1, 0.15, 0.175, 0.1875])
    zero = tv_bounds(0.7, 0.0, np.arange(3))
    assert np.all(np.isinf(zero["mixing"]))
    np.testing.assert_allclose(zero["recursive"], zero["linear"])
    np.testing.assert_allclose(tv_bounds(0.7, 1.0, np.arange(3))["recursive"], 0.3)
    np.testing.assert_allclose(tv_bounds(0.5, 1e-18, 9)["recursive"], 5.0)


@given(st.floats(1e-6, 1), st.floats(0, 1), st.integers(0, 500))
def test_recursive_is_never_looser(p, gamma, horizon):
    bounds = tv_bounds(p, gamma, np.arange(horizon + 1))
    assert np.all(bounds["recursive"] <= bounds["linear"])
    assert np.all(bounds["recursive"] <= bounds["mixing"])
    assert np.all(np.diff(bounds["recursive"]) >= -1e-15)


def test_tv_bounds_validates():
    with pytest.raises(ValueError, match="gamma must be in"):
        tv_bounds(0.9, 1.5, 3)
    with pytest.raises(ValueError, match="p must be in"):
        tv_bounds(0.0, 0.5, 3)
    with pytest.raises(ValueError, match="non-negative integer"):
        tv_bounds(0.9, 0.5, [-1])


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 12),
    alpha=st.sampled_from([0.05, 0.3, 1.0, 5.0]),
    p=st.one_of(st.floats(0.05, 1.0), st.sampled_from([0.5, 0.9, 1.0])),
)
def test_prediction_error_never_exceeds_the_recursive_bound(seed, n, alpha, p):
    hmm = build_model("dirichlet", n, seed=seed, alpha=alpha)
    horizon = 30
    tv = total_variation(predict(hmm, horizon), predict(topp_hmm(hmm, p), horizon))
    bound = tv_bounds(p, minimal_mixing_rate(hmm.transition), np.arange(horizon + 1))
    assert np.all(tv <= bound["recursive"] + 1e-9)


def test_bound_is_tight_for_the_uniform_hmm():
    hmm = build_model("uniform", 50)
    tv = total_variation(predict(hmm, 5), predict(topp_hmm(hmm, 0.7), 5))
    np.testing.assert_allclose(tv, tv_bounds(0.7, 1.0, np.arange(6))["recursive"], atol=1e-12)


def test_sparsity():
    M = np.array([[0.5, 0.0], [0.0, 1.0]])
    assert sparsity(M) == 0.5
    S = sp.csr_array(M)
    S.data[0] = 0.0  # an explicit zero still counts as zero
    assert sparsity(S) == 0.75
    assert sparsity(topp_hmm(build_model("uniform", 100), 0.9).transition) == pytest.approx(0.1)


def test_hmm_validation_of_metrics_inputs_is_not_needed_for_tv():
    hmm = HMM(np.array([1.0, 0.0]), np.eye(2), np.eye(2))
    assert total_variation(predict(hmm, 2), predict(hmm, 2)).max() == 0.0
