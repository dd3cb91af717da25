import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from pipeline.inference import predict
from pipeline.methods.topp import kept_mass, topp_hmm
from pipeline.metrics import (
    doeblin_lower_bound,
    error_bounds,
    minimal_mixing_rate,
    mixing_rate_part,
    sparsity,
    step_errors,
    total_variation,
    tv_bounds,
    tv_certificate,
)
from pipeline.models import build_model
from pipeline.operators import LowRank, SparsePlusRankOne
from pipeline.testing.formats import brute_force_gamma
from pipeline.testing.random_models import random_stochastic

from helpers import random_low_rank, random_structured


def test_total_variation():
    assert total_variation([1, 0, 0], [0, 0.5, 0.5]) == 1.0
    assert total_variation([0.5, 0.5], [0.5, 0.5]) == 0.0
    np.testing.assert_allclose(total_variation(np.eye(3), [0.2, 0.3, 0.5]), [0.8, 0.7, 0.5])


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_total_variation_refuses_what_is_not_finite(value):
    """NaN input gave a NaN distance: now the entry is named, whichever argument holds it."""
    damaged = np.full((3, 4), 0.25)
    damaged[2, 1] = value
    with pytest.raises(ValueError, match=rf"^Q\[2, 1\] = {value}; .* must be finite$"):
        total_variation(np.full(4, 0.25), damaged)
    with pytest.raises(ValueError, match=rf"^P\[2, 1\] = {value}; .* must be finite$"):
        total_variation(damaged, np.full(4, 0.25))


def _damaged(value: float) -> dict[str, object]:
    """A row-stochastic 6 x 6 matrix in each format with one entry (or factor) ``value``."""
    dense = random_stochastic(np.random.default_rng(0), 6, 6)
    dense[2, 3] = value
    structured = random_structured(1, 6, 6)
    low_rank = random_low_rank(2, 6, 6)
    right = low_rank.right.copy()
    right[4, 0] = value
    return {
        "dense": dense,
        "csr": sp.csr_array(dense),
        "coo": sp.coo_matrix(dense),
        "structured": SparsePlusRankOne(
            structured.sparse, structured.u, np.where(np.arange(6) == 1, value, structured.v)
        ),
        "lowrank": LowRank(low_rank.left, right, low_rank.band),
    }


@pytest.mark.parametrize("value", [np.nan, np.inf, -0.25])
@pytest.mark.parametrize("fmt", ["dense", "csr", "coo", "structured", "lowrank"])
def test_gamma_refuses_nan_infinite_and_negative_entries_in_every_format(value, fmt):
    """Gamma of a matrix with a NaN came out 1 (perfect mixing, the tightest bound) and with
    a negative entry 0: now every function of a transition matrix names the entry."""
    T = _damaged(value)[fmt]
    where = {"structured": r"T\.v\[1\]", "lowrank": r"T\.right\[4, 0\]"}.get(fmt, r"T\[2, 3\]")
    for measure in (
        minimal_mixing_rate,
        doeblin_lower_bound,
        lambda T: mixing_rate_part(T, 0, 2),
    ):
        with pytest.raises(ValueError, match=rf"^{where} = \S+; .*finite and non-negative$"):
            measure(T)


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
    structured = build_model("bell", 60, structured=True).transition
    assert minimal_mixing_rate(structured) == pytest.approx(brute_force_gamma(bell), abs=1e-12)
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


@given(
    eps=st.floats(0, 0.5),
    start=st.floats(0, 1),
    gamma=st.floats(0, 1),
    horizon=st.integers(0, 60),
)
def test_error_bounds_follow_their_recursion(eps, start, gamma, horizon):
    t = np.arange(horizon + 1)
    bounds = error_bounds(eps, gamma, t, start=start)
    e = [start]
    for _ in range(horizon):
        e.append((1 - gamma) * e[-1] + eps)
    expected = np.minimum(e, np.minimum(bounds["linear"], bounds["mixing"]))
    np.testing.assert_allclose(bounds["recursive"], expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(bounds["linear"], start + t * eps, rtol=1e-12, atol=1e-15)
    mixing = max(start, eps) / gamma if gamma > 0 else np.inf
    np.testing.assert_allclose(bounds["mixing"], mixing, rtol=1e-12)
    assert (bounds["recursive"] <= np.asarray(e) + 1e-12).all()


@given(st.floats(1e-6, 1), st.floats(0, 1), st.integers(0, 200))
def test_tv_bounds_are_the_error_bounds_of_eps_1_minus_p_bit_for_bit(p, gamma, horizon):
    """The top-p bounds from before the methods layer, written out, against the new ones."""
    t = np.arange(horizon + 1)
    loss, steps = 1.0 - p, (t + 1).astype(np.float64)
    linear = steps * loss
    if gamma > 0:
        mixing = np.full(t.shape, loss / gamma)
        geometric = -np.expm1(steps * np.log1p(-gamma)) / gamma if gamma < 1 else np.ones(t.shape)
        recursive = np.minimum(loss * geometric, np.minimum(linear, mixing))
    else:
        recursive = linear
    bounds = tv_bounds(p, gamma, t)
    np.testing.assert_array_equal(bounds["recursive"], recursive)
    np.testing.assert_array_equal(bounds["linear"], linear)


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 15),
    alpha=st.sampled_from([0.05, 0.3, 1.0]),
    p=st.floats(0.05, 1.0),
)
def test_certificate_holds_and_is_never_looser_than_the_recursion(seed, n, alpha, p):
    hmm = build_model("dirichlet", n, seed=seed, alpha=alpha)
    top = topp_hmm(hmm, p)
    approximate = predict(top, 25)
    tv = total_variation(predict(hmm, 25), approximate)
    gamma = minimal_mixing_rate(hmm.transition)
    prior_error = 1 - hmm.prior[top.prior > 0].sum()
    row_error = 1 - kept_mass(hmm.transition, top.transition)
    errors = step_errors(prior_error, row_error, approximate, np.zeros(26))
    certificate = tv_certificate(gamma, errors)
    assert np.all(tv <= certificate + 1e-9)
    assert np.all(certificate <= tv_bounds(p, gamma, np.arange(26))["recursive"] + 1e-9)
    measured = error_bounds(row_error.max(), gamma, np.arange(26), start=prior_error)
    assert np.all(tv <= measured["recursive"] + 1e-9)
    assert np.all(certificate <= measured["recursive"] + 1e-9)
    loose = tv_certificate(doeblin_lower_bound(hmm.transition), errors)
    assert np.all(certificate <= loose + 1e-12)
    # Before the methods layer the certificate was computed from the kept masses directly.
    dropped = approximate[:-1] @ (1.0 - kept_mass(hmm.transition, top.transition))
    before = [1.0 - hmm.prior[top.prior > 0].sum()]
    for t in range(1, 26):
        before.append((1.0 - gamma) * before[-1] + dropped[t - 1])
    np.testing.assert_array_equal(certificate, np.clip(before, 0.0, 1.0))
