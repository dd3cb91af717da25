"""Structured matrices (S + outer(u, v)) against their dense selves, in every module."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from test_metrics import brute_force_gamma

from pipeline.inference import filtering, predict
from pipeline.metrics import (
    doeblin_lower_bound,
    minimal_mixing_rate,
    mixing_rate_part,
    sparsity,
    total_variation,
    tv_bounds,
    tv_certificate,
)
from pipeline.models import HMM, build_model
from pipeline.models.structured import SparsePlusRankOne
from pipeline.topp import kept_mass, topp_hmm, topp_matrix


def random_structured(seed, n, m, constant_v=True, density=0.2):
    """A row-stochastic S + outer(u, v) with non-negative S."""
    rng = np.random.default_rng(seed)
    S = sp.random_array((n, m), density=density, rng=rng, format="csr")
    v = np.ones(m) if constant_v else rng.random(m) + 0.1
    u = rng.random(n) * 0.5 / v.sum()
    S = sp.diags_array((1 - u * v.sum()) / np.maximum(S.sum(axis=1), 1e-300)) @ S
    empty = np.asarray(S.sum(axis=1)).ravel() == 0  # rows without entries: all background
    u[empty] = 1 / v.sum()
    return SparsePlusRankOne(sp.csr_array(S), u, v)


def test_views_equal_the_dense_matrix():
    M = random_structured(0, 30, 20, constant_v=False)
    dense = M.rows(0, 30)
    np.testing.assert_allclose(dense, M.sparse.toarray() + np.outer(M.u, M.v))
    np.testing.assert_allclose(M.columns([3, 7]), dense[:, [3, 7]])
    np.testing.assert_allclose(M.at(np.array([1, 5]), np.array([2, 9])), dense[[1, 5], [2, 9]])
    np.testing.assert_allclose(M.row_sums(), 1.0)
    assert M.background is None and random_structured(0, 5, 5).background is not None


def test_validation_names_the_problem():
    M = random_structured(1, 6, 6)
    bad = SparsePlusRankOne(M.sparse, -M.u, M.v)
    with pytest.raises(ValueError, match=r"transition\.u\[0\] = -"):
        HMM(np.ones(6) / 6, bad, np.eye(6))
    off = SparsePlusRankOne(M.sparse * 0.5, M.u, M.v)
    with pytest.raises(ValueError, match="transition row 0 sums to"):
        HMM(np.ones(6) / 6, off, np.eye(6))
    with pytest.raises(ValueError, match="do not fit"):
        SparsePlusRankOne(M.sparse, M.u[:3], M.v)


@pytest.mark.parametrize("family, params", [("bell", {}), ("peaked", {"support": 5}), ("lm", None)])
def test_structured_families_equal_their_dense_form(family, params, tmp_path):
    if params is None:
        corpus = tmp_path / "c.txt"
        corpus.write_text(
            " ".join(f"w{chr(97 + i % 17)} w{chr(97 + i * 5 % 13)}" for i in range(400))
        )
        params = {"corpus": str(corpus)}
    dense = build_model(family, 16, seed=3, **params)
    structured = build_model(family, 16, seed=3, structured=True, **params)
    assert isinstance(structured.transition, SparsePlusRankOne)
    np.testing.assert_allclose(structured.transition.rows(0, 16), dense.transition, atol=1e-15)
    np.testing.assert_array_equal(structured.prior, dense.prior)


@pytest.mark.parametrize("constant_v", [True, False])
def test_inference_equals_dense(constant_v):
    T = random_structured(2, 25, 25, constant_v=constant_v)
    E = random_structured(3, 25, 7, constant_v=constant_v)
    prior = np.random.default_rng(4).dirichlet(np.ones(25))
    structured = HMM(prior, T, E)
    dense = HMM(prior, T.rows(0, 25), E.rows(0, 25))
    np.testing.assert_allclose(predict(structured, 15), predict(dense, 15), atol=1e-14)
    observations = np.random.default_rng(5).integers(-1, 7, size=(3, 16))
    a, b = filtering(structured, observations), filtering(dense, observations)
    np.testing.assert_allclose(a.beliefs, b.beliefs, atol=1e-14)
    np.testing.assert_allclose(a.log_evidence, b.log_evidence, rtol=1e-12)
    single = filtering(structured, observations[0])
    np.testing.assert_allclose(single.beliefs, b.beliefs[0], atol=1e-14)


@given(
    seed=st.integers(0, 2**32 - 1),
    constant_v=st.booleans(),
    p=st.sampled_from([0.3, 0.5, 0.8, 0.9, 0.97, 1.0]),
    density=st.sampled_from([0.05, 0.3]),
)
def test_topp_equals_dense(seed, constant_v, p, density):
    T = random_structured(seed, 30, 40, constant_v=constant_v, density=density)
    Q = topp_matrix(T, p)
    np.testing.assert_allclose(Q.toarray(), topp_matrix(T.rows(0, 30), p).toarray(), atol=1e-14)
    kept = kept_mass(T, Q)
    np.testing.assert_allclose(kept, kept_mass(T.rows(0, 30), Q), atol=1e-14)
    assert np.all(kept >= p - 1e-9)


def test_topp_refuses_to_keep_the_background_of_huge_models():
    huge = build_model("bell", 200_000, structured=True).transition
    assert topp_matrix(huge, 0.9).nnz == 5 * 200_000
    with pytest.raises(ValueError, match=r"top-p would keep about .* entries"):
        topp_matrix(huge, 0.95)


@pytest.mark.parametrize("constant_v", [True, False])
def test_metrics_equal_dense(constant_v):
    T = random_structured(6, 25, 25, constant_v=constant_v, density=0.1)
    dense = T.rows(0, 25)
    assert minimal_mixing_rate(T) == pytest.approx(brute_force_gamma(dense), abs=1e-12)
    assert min(mixing_rate_part(T, k, 3) for k in range(3)) == pytest.approx(
        minimal_mixing_rate(dense), abs=1e-12
    )
    assert doeblin_lower_bound(T) == pytest.approx(doeblin_lower_bound(dense), abs=1e-12)
    assert sparsity(T) == sparsity(dense)
    zeros = SparsePlusRankOne(
        sp.csr_array(np.diag([0.5, 0.0, 1.0])), np.array([0.5, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])
    )
    assert sparsity(zeros) == sparsity(zeros.rows(0, 3)) == pytest.approx(6 / 9)


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
    certificate = tv_certificate(
        gamma,
        hmm.prior[top.prior > 0].sum(),
        kept_mass(hmm.transition, top.transition),
        approximate,
    )
    assert np.all(tv <= certificate + 1e-9)
    assert np.all(certificate <= tv_bounds(p, gamma, np.arange(26))["recursive"] + 1e-9)
    loose = tv_certificate(
        doeblin_lower_bound(hmm.transition),
        hmm.prior[top.prior > 0].sum(),
        kept_mass(hmm.transition, top.transition),
        approximate,
    )
    assert np.all(certificate <= loose + 1e-12)
