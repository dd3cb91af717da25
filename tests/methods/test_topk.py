import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from pipeline.methods.topk import topk_hmm, topk_matrix, topk_vector
from pipeline.models import build_model
from pipeline.operators import toarray
from pipeline.testing.random_models import random_stochastic

from helpers import random_structured


def reference(v, k):
    """The first k non-zero entries of Algorithm 1's order (descending, lower index first)."""
    order = [j for j in sorted(range(len(v)), key=lambda j: (-v[j], j)) if v[j] > 0]
    kept = order[:k]
    out = np.zeros(len(v))
    out[kept] = np.asarray(v)[kept] / np.asarray(v)[kept].sum()
    return out


def test_golden_weather_row():
    # Sunny's next states (Table 1): 0.3, 0.25, 0.15, 0.2, 0.06, 0.04.
    sunny = build_model("weather", 6).transition[3]
    np.testing.assert_allclose(topk_vector(sunny, 2), [0.3 / 0.55, 0.25 / 0.55, 0, 0, 0, 0])
    np.testing.assert_allclose(
        topk_vector(sunny, 4), [0.3, 0.25, 0.15, 0.2, 0, 0] / np.float64(0.9)
    )


def test_ties_go_to_the_lower_index_and_zeros_are_never_kept():
    np.testing.assert_array_equal(topk_vector([0.25] * 4, 3), [1 / 3, 1 / 3, 1 / 3, 0])
    np.testing.assert_array_equal(topk_vector([0.0, 0.5, 0.0, 0.5], 3), [0, 0.5, 0, 0.5])


@given(
    st.lists(st.sampled_from([0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 1e-9]), min_size=1, max_size=30).filter(
        lambda w: sum(w) > 0
    ),
    st.integers(1, 35),
)
def test_vector_equals_the_literal_rule(weights, k):
    v = np.array(weights) / sum(weights)
    np.testing.assert_allclose(topk_vector(v, k), reference(v, k), rtol=1e-12, atol=0)


@given(st.integers(1, 20), st.integers(1, 40), st.integers(1, 45), st.integers(0, 2**32 - 1))
def test_matrix_rows_equal_vectors_in_every_format(n, d, k, seed):
    counts = np.random.default_rng(seed).integers(0, 4, (n, d)).astype(float)
    counts[:, 0] += 1
    P = counts / counts.sum(axis=1, keepdims=True)
    expected = np.array([reference(row, k) for row in P])
    for Q in (topk_matrix(P, k), topk_matrix(sp.csr_array(P), k)):
        assert isinstance(Q, sp.csr_array) and Q.has_sorted_indices
        np.testing.assert_allclose(Q.toarray(), expected, rtol=1e-12, atol=0)
        assert (np.diff(Q.indptr) == np.minimum(k, np.count_nonzero(P, axis=1))).all()


@pytest.mark.parametrize("k", [1, 3, 12, 40])
@pytest.mark.parametrize("constant_v", [True, False])
def test_structured_rows_equal_dense(k, constant_v):
    M = random_structured(9, 30, 40, constant_v=constant_v, density=0.1)
    np.testing.assert_allclose(
        topk_matrix(M, k).toarray(), topk_matrix(M.toarray(), k).toarray(), atol=1e-15
    )


def test_huge_structured_models_refuse_to_generate_their_background():
    huge = build_model("bell", 200_000, structured=True).transition
    assert topk_matrix(huge, 5).nnz == 5 * 200_000  # the five peaks decide every row
    with pytest.raises(ValueError, match=r"would generate .* entries: in 200000 rows"):
        topk_matrix(huge, 6)


def test_topk_hmm_applies_the_rule_everywhere():
    hmm = build_model("dirichlet", 12, seed=1, alpha=0.5)
    top = topk_hmm(hmm, 3)
    np.testing.assert_array_equal(top.prior, topk_vector(hmm.prior, 3))
    assert (toarray(top.transition) > 0).sum(axis=1).tolist() == [3] * 12
    assert (toarray(top.emission) > 0).sum(axis=1).tolist() == [3] * 12
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        topk_hmm(hmm, 0)


def test_matrix_larger_than_a_block():
    P = random_stochastic(np.random.default_rng(0), 1100, 1000, zeros=0.5)
    Q = topk_matrix(P, 7)  # 1100 x 1000 entries span two row blocks of 2**20
    for i in (0, 1047, 1048, 1099):
        np.testing.assert_array_equal(Q[[i]].toarray()[0], topk_vector(P[i], 7))
