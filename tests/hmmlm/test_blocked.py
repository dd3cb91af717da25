"""Blocked HMM LMs: the blocked recursion against ``pipeline.inference`` and against the
unblocked model with the same (zero outside the blocks) emissions, from the prior and
carried over from a segment before, against every path, every gradient against finite
differences (with and without state dropout, from the prior and carried), float32 against
float64, and sub-models."""

import numba
import numpy as np
import pytest

from pipeline.hmm import HMM
from pipeline.hmmlm import blocked, blocked_kernel, evidence
from pipeline.hmmlm import blocks as bm
from pipeline.hmmlm.clusters import blocks_of
from pipeline.hmmlm.parameters import Parameters, gradient, initial, softmax_rows
from pipeline.hmmlm.parameters import transition_matrix as unblocked_transition
from pipeline.inference import filtering, smoothing
from pipeline.operators import entry_rows, toarray
from pipeline.testing.random_models import random_hmm

from helpers import (
    array_leaves,
    brute_force_log_evidence,
    finite_difference_errors,
    random_low_rank,
)

# 7 words in 3 clusters ({0, 3}, {1, 4, 6}, {2, 5}), 2 states each: 6 states.
CLUSTER = np.array([0, 1, 2, 0, 1, 2, 1])
BLOCKS = blocks_of(CLUSTER, 2)
KINDS = {
    "softmax": ("softmax", {}),
    "kernel": ("kernel", {"n_features": 3, "dim": 2}),
    "banded_kernel": ("kernel", {"n_features": 3, "dim": 2, "delta": 2}),
    "neural": ("neural", {"dim": 3}),
}


def _model(name, blocks=BLOCKS, seed=3, dtype=np.float64):
    kind, params = KINDS[name]
    p = initial(kind, blocks.n_states, blocks.n_words, seed=seed, **params,
                emission_size=blocks.states * blocks.n_words)  # fmt: skip
    rng = np.random.default_rng(seed)
    p = p._replace(prior=rng.standard_normal(p.prior.shape))  # far from uniform
    if kind == "kernel":  # band logits of order one, so the band matters
        p = p._replace(
            transition=p.transition._replace(band=rng.standard_normal(p.transition.band.shape))
        )
    return _as(p, dtype)


def _as(p, dtype):
    t = p.transition
    return Parameters(
        p.prior.astype(dtype), p.emission.astype(dtype), type(t)(*(x.astype(dtype) for x in t))
    )


def _unblocked(p, blocks=BLOCKS):
    """The same model as an unblocked one: emission logits -inf outside each state's cluster."""
    E = bm.emission_matrix(bm.emission_probabilities(p.emission, blocks), blocks).toarray()
    with np.errstate(divide="ignore"):
        return p._replace(emission=np.log(E)), E


def _width(p):
    return p.transition.band.shape[1] if hasattr(p.transition, "band") else 0


TOKENS = np.random.default_rng(1).integers(0, 7, (3, 6))
NEXT = np.random.default_rng(2).integers(0, 7, (3, 5))  # the segment after TOKENS


def _carried(blocks, beliefs, previous):
    """The unblocked beliefs (B, n) at the tokens ``previous`` as the blocked carry (B, k):
    over the states of each token's cluster."""
    k = blocks.states
    first = blocks.cluster[previous] * k
    return np.stack([row[c : c + k] for row, c in zip(beliefs, first, strict=True)])


def _as_blocks(T, coded: blocked.Coded):
    """A dense matrix (n, n) as the blocks its tokens visit (the softmax's ``DenseBlocks``),
    a ``LowRank`` as ``T = L R^T + S``, ``S`` the band's entries less the product's."""
    k = BLOCKS.states
    if isinstance(T, np.ndarray):
        slot = blocked.visited(coded, BLOCKS.n_clusters)
        a, b = np.nonzero(slot >= 0)
        C = BLOCKS.n_clusters
        return blocked.DenseBlocks(np.ascontiguousarray(T.reshape(C, k, C, k)[a, :, b, :]), slot)
    band, rows = T.band, entry_rows(T.band.indptr)
    product = np.einsum("kf,kf->k", T.left[rows], T.right[band.indices])
    indptr, indices = band.indptr.astype(np.int64), band.indices.astype(np.int64)
    return blocked.LowRankBlocks(T.left, T.right, indptr, indices, band.data - product)


@pytest.mark.parametrize("form", ["dense", "banded"])
def test_the_compiled_blocked_recursion_is_pipeline_inferences_smoothing(form):
    """The compiled special case that stays (``pipeline.hmmlm.blocked`` says why) against
    ``pipeline.inference`` on the same model as an ``HMM``: the evidence, the posteriors'
    emission counts, the pair marginals of every transition, the last filtered beliefs."""
    n, k = BLOCKS.n_states, BLOCKS.states
    rng = np.random.default_rng(5)
    prior = rng.dirichlet(np.ones(n))
    T = random_hmm(5, n, 1).transition if form == "dense" else random_low_rank(5, n, n, 2, 2)
    emission = bm.emission_probabilities(rng.standard_normal(k * BLOCKS.n_words), BLOCKS)
    E = bm.emission_matrix(emission, BLOCKS).toarray()
    coded = blocked.code(TOKENS, BLOCKS)
    s = blocked.statistics(prior, emission, BLOCKS, _as_blocks(T, coded), coded)
    hmm = HMM(prior, T, E)
    reference = smoothing(hmm, TOKENS, counts=True)
    assert s.log_evidence == pytest.approx(reference.log_evidence.sum(), rel=1e-12)
    counts = np.zeros_like(E)
    for b, t in np.ndindex(TOKENS.shape):
        counts[:, TOKENS[b, t]] += reference.posteriors[b, t]
    np.testing.assert_allclose(bm.emission_matrix(s.emission_counts, BLOCKS).toarray(), counts)
    pairs, dense = np.zeros((n, n)), toarray(T)
    f = s.transitions
    for r in range(f.source.size):
        a, c = f.source[r] * k, f.target[r] * k
        pairs[a : a + k, c : c + k] += (
            f.before[r][:, None] * dense[a : a + k, c : c + k] * f.after[r]
        )
    np.testing.assert_allclose(pairs, toarray(reference.transition_counts), atol=1e-12)
    last = filtering(hmm, TOKENS).beliefs[:, -1]
    np.testing.assert_allclose(s.last, _carried(BLOCKS, last, TOKENS[:, -1]), atol=1e-12)


@pytest.mark.parametrize("carried", [False, True])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_blocked_recursion_is_the_unblocked_model_with_zero_emissions(name, carried):
    """From the prior, and carried: the segment NEXT continuing TOKENS, its first step a
    transition from TOKENS' last beliefs."""
    p = _model(name)
    unblocked, E = _unblocked(p)
    prior, T = softmax_rows(p.prior), unblocked_transition(p.transition)
    first = evidence.statistics(prior, T, E, TOKENS)
    tokens, carry, previous = (NEXT, first.last, TOKENS[:, -1]) if carried else (TOKENS, None, None)
    s = evidence.statistics(prior, T, E, tokens, carry)
    expected = gradient(unblocked, s, 0 if carried else len(tokens))
    blocked_carry = None if carry is None else _carried(BLOCKS, carry, previous)
    log_evidence, grad, last = bm.batch_gradient(
        p, BLOCKS, tokens, bm.full(BLOCKS, _width(p)), carry=blocked_carry, previous=previous
    )
    assert log_evidence == pytest.approx(s.log_evidence, abs=1e-10)
    np.testing.assert_allclose(last, _carried(BLOCKS, s.last, tokens[:, -1]), atol=1e-12)
    np.testing.assert_allclose(grad.prior, expected.prior, atol=1e-10)
    blocked_emission = bm.emission_matrix(grad.emission, BLOCKS).toarray()
    np.testing.assert_allclose(blocked_emission, np.where(E > 0, expected.emission, 0), atol=1e-10)
    for mine, theirs in zip(grad.transition, expected.transition, strict=True):
        np.testing.assert_allclose(mine, theirs, atol=1e-10)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_streams_in_segments_have_the_evidence_of_the_whole_streams(name):
    p = _model(name)
    streams = np.concatenate([TOKENS, NEXT], axis=1)
    prior, T = softmax_rows(p.prior), unblocked_transition(p.transition)
    whole = evidence.log_evidence(prior, T, _unblocked(p)[1], streams)[0]
    for length in (1, 4, 11, 64):
        assert bm.log_evidence(p, BLOCKS, streams, length) == pytest.approx(whole, abs=1e-10)


def test_the_blocked_evidence_is_the_sum_over_all_paths():
    p = _model("banded_kernel")
    tokens = TOKENS[:2, :4]
    prior, E = softmax_rows(p.prior), _unblocked(p)[1]
    T = toarray(unblocked_transition(p.transition))
    expected = brute_force_log_evidence(prior, T, E, tokens)
    assert bm.log_evidence(p, BLOCKS, tokens) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("carried", [False, True])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_blocked_gradient_equals_finite_differences(name, dropout, carried):
    """With a carry (a random belief over every state of the previous tokens' clusters),
    the carry is a constant: the gradient is that of the segment's evidence given it."""
    blocks = blocks_of(CLUSTER, 4)  # 12 states, 2 of each cluster's 4 kept with dropout
    p = _model(name, blocks)
    r = bm.restriction(blocks, bm.kept_states(blocks, dropout, np.random.default_rng(0)), _width(p))
    assert r.states.size == (6 if dropout else 12)
    carry = np.random.default_rng(4).dirichlet(np.ones(4), 3) if carried else None
    previous = NEXT[:, 0] if carried else None

    def log_evidence(q):
        return bm.batch_gradient(q, blocks, TOKENS, r, carry=carry, previous=previous)[0]

    grad = bm.batch_gradient(p, blocks, TOKENS, r, carry=carry, previous=previous)[1]
    checked = 0
    for path, index, expected, numeric in finite_difference_errors(
        log_evidence, p, grad, samples=9
    ):
        assert expected == pytest.approx(numeric, abs=1e-7), (path, index)
        checked += 1
    assert checked >= 30


@pytest.mark.parametrize("name", sorted(KINDS))
def test_float32_parameters_give_the_float64_gradient_to_float32_precision(name):
    p = _model(name, blocks_of(CLUSTER, 4))
    r = bm.full(blocks_of(CLUSTER, 4), _width(p))
    exact, single = (
        bm.batch_gradient(_as(p, dtype), blocks_of(CLUSTER, 4), TOKENS, r)[:2]
        for dtype in (np.float64, np.float32)
    )
    assert single[0] == pytest.approx(exact[0], rel=1e-5)
    for (_, mine), (_, theirs) in zip(array_leaves(single[1]), array_leaves(exact[1]), strict=True):
        assert mine.dtype == np.float32
        np.testing.assert_allclose(
            mine, theirs, atol=2e-5 * max(1.0, np.abs(theirs).max(initial=0))
        )


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_sub_model_is_the_model_restricted_to_its_states(name):
    """State dropout's sub-model: prior, transition rows renormalised over the kept states;
    each kept state keeps its emissions."""
    blocks = blocks_of(CLUSTER, 4)
    p = _model(name, blocks)
    kept = np.array([[0, 3], [1, 2], [2, 3]])
    r = bm.restriction(blocks, kept, _width(p))
    keep = np.array([0, 3, 5, 6, 10, 11])
    np.testing.assert_array_equal(r.states, keep)
    prior = softmax_rows(p.prior[keep])
    T = toarray(unblocked_transition(p.transition))[np.ix_(keep, keep)]
    E = _unblocked(p, blocks)[1][keep]
    expected = evidence.log_evidence(prior, T / T.sum(axis=1, keepdims=True), E, TOKENS)[0]
    assert bm.batch_gradient(p, blocks, TOKENS, r)[0] == pytest.approx(expected, abs=1e-10)


def test_the_emission_matrix_is_zero_outside_each_states_cluster():
    p = _model("softmax")
    E = bm.emission_matrix(bm.emission_probabilities(p.emission, BLOCKS), BLOCKS)
    np.testing.assert_allclose(E.sum(axis=1), 1.0)
    rows, columns = E.nonzero()
    np.testing.assert_array_equal(CLUSTER[columns], rows // 2)
    assert E.nnz == 2 * 7  # every state over every word of its cluster


def test_float32_kernels_stay_in_range_where_their_features_scales_spread_past_it():
    """Embeddings and features scaled until phi's values span far more than float32's range
    (e^88): the blocked float32 recursion and gradient stay finite and give the float64
    unblocked model's evidence to float32 precision."""
    blocks = blocks_of(CLUSTER, 4)
    p = _model("kernel", blocks)
    t = p.transition
    p = p._replace(transition=t._replace(U=12 * t.U, V=12 * t.V, W=6 * t.W))
    logits = p.transition.V @ p.transition.W.T - 0.5 * (p.transition.V**2).sum(1)[:, None]
    assert np.ptp(logits) > 150  # exp of this spread is no float32
    E = _unblocked(p, blocks)[1]
    prior, T = softmax_rows(p.prior), unblocked_transition(p.transition)
    expected = evidence.statistics(prior, T, E, TOKENS).log_evidence
    single = _as(p, np.float32)
    log_evidence, grad, _ = bm.batch_gradient(single, blocks, TOKENS, bm.full(blocks, _width(p)))
    assert log_evidence == pytest.approx(expected, rel=1e-5)
    assert all(np.isfinite(leaf).all() for _, leaf in array_leaves(grad))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_batch_gives_the_same_bits_on_one_thread_or_all(name):
    """The sequences run in parallel, each into its own rows; the sums are made afterwards
    in a fixed order."""
    blocks = blocks_of(CLUSTER, 4)
    p = _model(name, blocks, dtype=np.float32)
    r = bm.full(blocks, _width(p))
    tokens = np.random.default_rng(7).integers(0, 7, (16, 9))
    before = numba.get_num_threads()
    runs = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        runs.append(bm.batch_gradient(p, blocks, tokens, r))
    numba.set_num_threads(before)
    (one, grad_one, last_one), (many, grad_many, last_many) = runs
    assert one == many
    np.testing.assert_array_equal(last_one, last_many)
    for (_, a), (_, b) in zip(array_leaves(grad_one), array_leaves(grad_many), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_kernels_features_are_numpys_passes_bit_for_bit():
    """``_exp_balanced``'s compiled passes (the column maxima over tiles of rows, across
    threads) give the bits of the same steps written as numpy passes, over several tiles."""
    rng = np.random.default_rng(5)
    n, F = 3 * blocked_kernel.ROWS + 17, 40
    L, R = (3 * rng.standard_normal((n, F), dtype=np.float32) for _ in range(2))
    half_u, half_v = rng.random(n), rng.random(n)
    expected_R = R - half_v.astype(np.float32)[:, None]
    top = expected_R.max(axis=0)
    expected_R = np.exp(expected_R - top)
    expected_L = L - half_u.astype(np.float32)[:, None] + top
    expected_shift = expected_L.max(axis=1)
    expected_L = np.exp(expected_L - expected_shift[:, None])
    shift = blocked_kernel._exp_balanced(L, R, half_u, half_v)
    np.testing.assert_array_equal(R, expected_R)
    np.testing.assert_array_equal(L, expected_L)
    np.testing.assert_array_equal(shift, expected_shift)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_emissions_and_their_gradient_are_each_rows_softmax(dtype):
    """The flat emissions, all rows at once, against a softmax of each state's row of its
    cluster's block, and their gradient against ``counts - total * probabilities`` row by
    row, to the rounding of the dtype (the totals are summed in another order)."""
    blocks = blocks_of(np.random.default_rng(3).integers(0, 5, 40) % 5, 3)
    rng = np.random.default_rng(4)
    logits = (4 * rng.standard_normal(blocks.states * blocks.n_words)).astype(dtype)
    counts = rng.random(logits.size)
    probabilities = bm.emission_probabilities(logits, blocks)
    gradient = bm.emission_gradient(counts, probabilities, blocks)
    k, tolerance = blocks.states, 1e-6 if dtype == np.float32 else 1e-14
    for c in range(blocks.n_clusters):
        lo, hi = k * blocks.starts[c], k * blocks.starts[c + 1]
        rows = softmax_rows(logits[lo:hi].reshape(k, -1).astype(np.float64))
        np.testing.assert_allclose(probabilities[lo:hi].reshape(k, -1), rows, rtol=tolerance)
        counts_c = counts[lo:hi].reshape(k, -1)
        expected = counts_c - counts_c.sum(axis=1, keepdims=True) * rows
        np.testing.assert_allclose(gradient[lo:hi].reshape(k, -1), expected, atol=10 * tolerance)
    assert probabilities.dtype == gradient.dtype == dtype
