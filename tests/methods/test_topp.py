import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pipeline.methods import approximate
from pipeline.methods.topp import kept_mass, topp_hmm, topp_matrix, topp_vector
from pipeline.metrics import total_variation
from pipeline.models import build_model
from pipeline.models.weather import STATES
from pipeline.testing.random_models import random_stochastic

from helpers import algorithm_1, random_structured

SUNNY = STATES.index("sunny")


class TestGolden:
    def test_table_2(self):
        hmm = build_model("weather", 6)
        np.testing.assert_allclose(
            topp_vector(hmm.transition[SUNNY], 0.9),
            [1 / 3, 5 / 18, 1 / 6, 2 / 9, 0, 0],
            rtol=0,
            atol=1e-12,
        )

    def test_example_2_p_091_adds_heavy_rain(self):
        q = topp_vector(build_model("weather", 6).transition[SUNNY], 0.91)
        assert [STATES[j] for j in np.flatnonzero(q)] == [
            "partly cloudy",
            "light rain",
            "foggy",
            "sunny",
            "heavy rain",
        ]
        np.testing.assert_allclose(q, np.array([0.3, 0.25, 0.15, 0.2, 0.06, 0]) / 0.96, atol=1e-12)

    def test_table_3(self):
        # Table 3 as printed: one column per current state; transposed into rows here.
        printed = np.array(
            [
                [3 / 7, 0.25, 3 / 7, 0.4, 0, 0],
                [2 / 7, 0.25, 2 / 7, 1 / 3, 2 / 7, 2 / 7],
                [0, 0, 2 / 7, 0, 0, 0],
                [2 / 7, 0, 0, 4 / 15, 0, 0],
                [0, 0.25, 0, 0, 2 / 7, 3 / 7],
                [0, 0.25, 0, 0, 3 / 7, 2 / 7],
            ]
        )
        top = topp_hmm(build_model("weather", 6), 0.7)
        np.testing.assert_allclose(top.transition.toarray(), printed.T, rtol=0, atol=1e-12)

    def test_example_3_emissions(self):
        original = build_model("weather", 6)
        top = topp_hmm(original, 0.7).emission.toarray()
        # Raincoat is certain in heavy rain and thunderstorm, unaltered elsewhere.
        np.testing.assert_allclose(top[4:], [[0, 1], [0, 1]], atol=1e-12)
        np.testing.assert_allclose(top[:4], original.emission[:4], atol=1e-12)


class TestTopPVector:
    @pytest.mark.parametrize("p", [0, -0.1, 1.5, float("nan")])
    def test_p_outside_unit_interval(self, p):
        with pytest.raises(ValueError, match=r"p must be in \(0, 1\]"):
            topp_vector([0.5, 0.5], p)

    @pytest.mark.parametrize("p", [True, "0.5", None])
    def test_p_not_a_number(self, p):
        with pytest.raises(TypeError, match="p must be a number"):
            topp_vector([0.5, 0.5], p)

    def test_ties_go_to_the_lower_index(self):
        np.testing.assert_array_equal(topp_vector([0.25] * 4, 0.5), [0.5, 0.5, 0, 0])
        np.testing.assert_array_equal(topp_vector([0.1, 0.3, 0.3, 0.3], 0.4), [0, 0.5, 0.5, 0])

    def test_p_one_keeps_every_non_zero_entry(self):
        v = np.array([1 - 1e-13, 0.0, 1e-13])
        np.testing.assert_array_equal(topp_vector(v, 1.0) > 0, [True, False, True])

    def test_bad_vectors(self):
        with pytest.raises(ValueError, match="non-negative"):
            topp_vector([0.5, -0.5, 1.0], 0.5)
        with pytest.raises(ValueError, match="positive mass"):
            topp_vector([0.0, 0.0], 0.5)
        with pytest.raises(ValueError, match="1-D"):
            topp_vector([[0.5, 0.5]], 0.5)


def distributions(max_size=40):
    """Probability vectors with exact zeros and ties (entries on a coarse grid)."""
    weights = arrays(
        np.float64,
        st.integers(1, max_size),
        elements=st.sampled_from([0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 0.5, 1e-9, 7.25]),
    )
    continuous = arrays(
        np.float64, st.integers(1, max_size), elements=st.floats(0, 1, allow_subnormal=False)
    )
    return st.one_of(weights, continuous).filter(lambda w: w.sum() > 0).map(lambda w: w / w.sum())


probabilities = st.one_of(
    st.just(1.0),
    st.floats(1e-6, 1.0, exclude_min=True),
    st.sampled_from([0.5, 0.7, 0.9, 0.25, 1e-9]),
)


class TestProperties:
    @given(distributions(), probabilities)
    def test_algorithm_1(self, v, p):
        q = topp_vector(v, p)
        reference = algorithm_1(v, p)
        np.testing.assert_array_equal(q > 0, reference > 0)
        np.testing.assert_allclose(q, reference, rtol=1e-12, atol=0)
        assert q.sum() == pytest.approx(1.0, abs=1e-12)
        assert total_variation(v, q) <= 1 - p + 1e-9

    @given(distributions(), probabilities)
    def test_kept_set_is_the_shortest_reaching_prefix(self, v, p):
        kept = topp_vector(v, p) > 0
        order = np.lexsort((np.arange(v.size), -v))
        prefix = kept[order]
        k = int(prefix.sum())
        assert prefix[:k].all() and not prefix[k:].any()
        mass = v[order[:k]].sum()
        if p < 1:
            assert mass >= p - 1e-9
            assert v[order[: k - 1]].sum() < p + 1e-9
        else:
            assert k == np.count_nonzero(v)

    @given(
        st.integers(1, 30),
        st.integers(1, 30),
        st.floats(0, 0.9),
        probabilities,
        st.integers(0, 2**32 - 1),
    )
    def test_matrix_rows_equal_vectors(self, n, d, zeros, p, seed):
        P = random_stochastic(np.random.default_rng(seed), n, d, zeros)
        dense, sparse = topp_matrix(P, p), topp_matrix(sp.csr_array(P), p)
        expected = np.array([topp_vector(row, p) for row in P])
        for Q in (dense, sparse):
            assert isinstance(Q, sp.csr_array) and Q.has_sorted_indices
            assert np.all(Q.data > 0)
            np.testing.assert_array_equal(Q.toarray(), expected)
            np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-12)


@given(st.integers(1, 20), st.integers(1, 40), probabilities, st.integers(0, 2**32 - 1))
def test_matrix_rows_with_ties_equal_vectors(n, d, p, seed):
    # Entries from {0, 1, 2, 3} / row sum: exact ties, and cuts that fall inside a tie level.
    counts = np.random.default_rng(seed).integers(0, 4, (n, d)).astype(float)
    counts[:, 0] += 1
    P = counts / counts.sum(axis=1, keepdims=True)
    expected = np.array([topp_vector(row, p) for row in P])
    for Q in (topp_matrix(P, p), topp_matrix(sp.csr_array(P), p)):
        np.testing.assert_array_equal(Q.toarray(), expected)


def test_matrix_larger_than_a_block():
    # 1100 x 1000 entries span two row blocks of 2**20 entries.
    P = random_stochastic(np.random.default_rng(0), 1100, 1000, zeros=0.5)
    Q = topp_matrix(P, 0.8)
    for i in (0, 1047, 1048, 1049, 1099):
        np.testing.assert_array_equal(Q[[i]].toarray()[0], topp_vector(P[i], 0.8))


def test_a_generated_row_block_is_made_once_and_equals_the_dense_rows(monkeypatch):
    # A low-rank matrix of 1100 x 1100 spans two row blocks, each a product of its factors.
    T = build_model("kernel", 1100, seed=2, n_features=8).transition
    made, rows = [], type(T).rows
    monkeypatch.setattr(type(T), "rows", lambda T, a, b: made.append(a) or rows(T, a, b))
    Q = topp_matrix(T, 0.8)
    assert made == sorted(set(made)) and len(made) == 2
    np.testing.assert_allclose(Q.toarray(), topp_matrix(T.toarray(), 0.8).toarray(), rtol=1e-12)


def test_matrix_validates_input():
    with pytest.raises(ValueError, match="non-negative"):
        topp_matrix(np.array([[0.5, -0.5, 1.0]]), 0.5)
    with pytest.raises(ValueError, match="2-D"):
        topp_matrix(np.ones(3) / 3, 0.5)
    with pytest.raises(ValueError, match=r"p must be in \(0, 1\]"):
        topp_matrix(np.eye(2), 2)


def test_topp_hmm_applies_definition_4():
    hmm = build_model("dirichlet", 20, seed=4, alpha=0.3)
    top = topp_hmm(hmm, 0.6)
    np.testing.assert_array_equal(top.prior, topp_vector(hmm.prior, 0.6))
    for original, kept in ((hmm.transition, top.transition), (hmm.emission, top.emission)):
        assert isinstance(kept, sp.csr_array)
        np.testing.assert_array_equal(kept.toarray(), topp_matrix(original, 0.6).toarray())


def test_a_prior_kept_whole_carries_no_negative_error():
    """Bell's prior at 20 states sums to 1 + 2^-52: top-0.999 keeps all of it, and its error
    (one minus the kept mass) is 0, not -2.2e-16, which the bounds refused in every cell."""
    hmm = build_model("bell", 20)
    assert 1.0 - hmm.prior.sum() < 0
    approximation = approximate(hmm, "topp", 0.999)
    assert approximation.prior_error == 0.0 and approximation.start_error == 0.0


@given(
    seed=st.integers(0, 2**32 - 1),
    constant_v=st.booleans(),
    p=st.sampled_from([0.3, 0.5, 0.8, 0.9, 0.97, 1.0]),
    density=st.sampled_from([0.05, 0.3]),
)
def test_structured_rows_equal_dense(seed, constant_v, p, density):
    T = random_structured(seed, 30, 40, constant_v=constant_v, density=density)
    Q = topp_matrix(T, p)
    np.testing.assert_allclose(Q.toarray(), topp_matrix(T.toarray(), p).toarray(), atol=1e-14)
    kept = kept_mass(T, Q)
    np.testing.assert_allclose(kept, kept_mass(T.toarray(), Q), atol=1e-14)
    assert np.all(kept >= p - 1e-9)


def test_huge_structured_models_refuse_to_keep_their_background():
    huge = build_model("bell", 200_000, structured=True).transition
    assert topp_matrix(huge, 0.9).nnz == 5 * 200_000
    with pytest.raises(ValueError, match=r"the selection would keep about .* entries"):
        topp_matrix(huge, 0.95)
