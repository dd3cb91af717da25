"""The contract every matrix format passes: each operation equals the same on the dense matrix
(``pipeline.testing.formats``, run here on every built-in format), and what each format does
of its own.

A new format adds a factory to ``FORMATS`` (a random row-stochastic matrix in
the format and its dense materialisation) and must pass every test here.
"""

import tracemalloc

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from pipeline import operators
from pipeline.inference import filtering
from pipeline.kernels import backward, forward, maxproduct
from pipeline.methods.topp import topp_hmm
from pipeline.metrics import doeblin_lower_bound, mixing_rate_part
from pipeline.models import HMM, build_model, gamma_exact_max_states
from pipeline.operators import LowRank, SparsePlusRankOne
from pipeline.operators.lowrank import factor_doeblin_bound
from pipeline.testing import formats
from pipeline.testing.formats import random_weights
from pipeline.testing.random_models import random_stochastic

from helpers import random_low_rank, random_structured


def _dense(seed, n, m):
    T = random_stochastic(np.random.default_rng(seed), n, m, zeros=0.3)
    return T, T


def _csr(seed, n, m):
    T = random_stochastic(np.random.default_rng(seed), n, m, zeros=0.6)
    return sp.csr_array(T), T


def _csr_long_rows(seed, n, m):
    """Rows of ``m > 64`` entries: a step goes row by row rather than over all entries at once."""
    T = random_stochastic(np.random.default_rng(seed), n, m, zeros=0.05)
    return sp.csr_array(T), T


def _structured(seed, n, m):
    M = random_structured(seed, n, m, constant_v=True)
    return M, M.toarray()


def _structured_long_rows(seed, n, m):
    M = random_structured(seed, n, m, constant_v=True, density=0.9)
    return M, M.toarray()


def _structured_free_v(seed, n, m):
    M = random_structured(seed, n, m, constant_v=False)
    return M, M.toarray()


def _low_rank(seed, n, m):
    M = random_low_rank(seed, n, m, rank=5)
    return M, M.toarray()


def _low_rank_banded(seed, n, m):
    M = random_low_rank(seed, n, m, rank=3, delta=3, zeros=0.3)
    return M, M.toarray()


FORMATS = {
    "dense": _dense,
    "csr": _csr,
    "csr-long-rows": _csr_long_rows,
    "structured": _structured,
    "structured-long-rows": _structured_long_rows,
    "structured-free-v": _structured_free_v,
    "lowrank": _low_rank,
    "lowrank-banded": _low_rank_banded,
}


@pytest.fixture(params=sorted(FORMATS))
def square(request):
    """An 80 x 80 transition matrix in the format and as a dense array."""
    return FORMATS[request.param](3, 80, 80)


@pytest.fixture(params=sorted(FORMATS))
def wide(request):
    """An 80 x 9 emission-shaped matrix in the format and as a dense array."""
    return FORMATS[request.param](4, 80, 9)


@pytest.mark.parametrize(
    "check",
    [c for c in formats.CHECKS if c is not formats.check_filtering],
    ids=lambda check: check.__name__,
)
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_passes_the_contract(name, check):
    check(FORMATS[name])


@pytest.mark.parametrize("prune", [1.0, 0.8])
@pytest.mark.parametrize("emission", sorted(FORMATS))
@pytest.mark.parametrize("transition", sorted(FORMATS))
def test_filtering_equals_dense_in_every_pair_of_formats(transition, emission, prune):
    """The contract's ``check_filtering``, transitions in one format and emissions in another,
    with and without belief pruning."""
    formats.check_filtering(FORMATS[transition], FORMATS[emission], prune=prune)


def test_stored_entries_and_work(wide):
    T, dense = wide
    n, m = dense.shape
    if isinstance(T, np.ndarray):
        expected = n * m
    elif isinstance(T, sp.csr_array):
        expected = np.count_nonzero(dense)
    elif isinstance(T, LowRank):
        expected = (n + m) * T.rank + T.band.nnz
    else:
        expected = T.sparse.nnz + n + m
    assert operators.stored_entries(T) == expected
    support = np.zeros(n, dtype=bool)
    fixed = operators.step_work(T, support)
    support[[2, 7]] = True
    read = operators.step_work(T, support) - fixed
    # Two states' rows cost at most two dense rows; every state at most a dense step and the
    # factors of a rank-one part.
    assert 0 < read <= 2 * m
    everything = operators.step_work(T, np.ones(n, dtype=bool))
    assert operators.step_work(T, support) < everything <= n * m + n + m


def test_a_step_operator_registers_its_own_products():
    """The step-operator protocol is open: a class registering the three products is stepped
    by them (``pipeline.coupled.exact.JointTransition`` is one); anything else is refused."""

    class Doubling:
        shape = (2, 2)

    assert not operators.compiled(Doubling())
    with pytest.raises(TypeError, match="unsupported matrix type Doubling"):
        operators.forward_product(Doubling(), np.ones(2))
    operators.forward_product.register(Doubling, lambda T, beliefs: 2 * np.asarray(beliefs))
    np.testing.assert_array_equal(operators.forward_product(Doubling(), [1.0, 3.0]), [2.0, 6.0])


def _uniform(name: str, n: int):
    """An n x n uniform matrix in the format: every product of equal weights ties."""
    if name.startswith("dense"):
        return np.full((n, n), 1 / n)
    if name.startswith("csr"):
        return sp.csr_array(np.full((n, n), 1 / n))
    if name.startswith("structured"):
        return SparsePlusRankOne(sp.csr_array((n, n)), np.full(n, 1 / n), np.ones(n))
    return LowRank(np.full((n, 1), 1 / n), np.ones((n, 1)))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_max_product_ties_go_to_the_lowest_state(name):
    T = _uniform(name, 6)
    w = np.array([0.0, 0.5, 0.25, 0.5, 0.5, 0.0])  # states 1, 3 and 4 tie
    found = operators.max_product(T, w)
    np.testing.assert_array_equal(found.states, 1)
    np.testing.assert_array_equal(found.values, 0.5 / 6)
    np.testing.assert_array_equal(operators.max_product(T, np.zeros(6)).states, 0)


def test_a_large_low_rank_matrix_refuses_the_max_product_step():
    T = build_model("kernel", 6000, n_features=2, n_observations=4).transition
    message = "generates all of its 36,000,000 entries .* decode a sparse approximation"
    with pytest.raises(ValueError, match=message):
        operators.max_product(T, np.ones(6000))
    with pytest.raises(ValueError, match=message):
        operators.check_max_product(T)
    operators.check_max_product(np.eye(3))  # the other formats read their stored entries


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_expected_counts_keep_the_format(name):
    """``T * (before.T @ after)`` (equal to the dense one: ``check_expected_counts``) in the
    format's own cost: on the stored entries of CSR, exactly factored for the factored
    formats."""
    T, _ = FORMATS[name](3, 80, 80)
    rng = np.random.default_rng(10)
    counts = operators.expected_counts(T, rng.random((6, 80)), rng.random((6, 80)))
    kind = {np.ndarray: np.ndarray, sp.csr_array: sp.csr_array}.get(type(T), LowRank)
    assert isinstance(counts, kind)
    if isinstance(T, sp.csr_array):
        np.testing.assert_array_equal(counts.indices, T.indices)


def test_low_rank_draws_whose_band_holds_most_of_the_product_fall_back_to_the_row():
    """A band over every column but two holds almost all the product's mass: draws off the
    band keep landing on it, and past ``REJECTIONS`` the row is generated."""
    n = 8
    band = sp.csr_array(np.where(np.arange(n) < n - 2, 0.1, 0.0)[None].repeat(n, axis=0))
    band = sp.csr_array((band.data, band.indices, band.indptr), shape=(n, n))
    right = np.r_[np.ones(n - 2), 1e-4, 3e-4][:, None]
    M = LowRank(np.full((n, 1), 0.4 / 4e-4), right, band)
    dense = M.toarray()
    np.testing.assert_allclose(dense.sum(axis=1), 1.0)
    drawn = operators.column_sampler(M)(np.zeros(20000, np.int64), np.random.default_rng(1))
    observed = np.bincount(drawn, minlength=n)
    assert stats.chisquare(observed, 20000 * dense[0]).pvalue > 1e-3, observed


def test_the_parts_of_gamma_have_one_public_meaning_each():
    """``pipeline.metrics`` owns ``mixing_rate_part`` (a part of a partition of the row pairs)
    and ``doeblin_lower_bound`` (clipped at 1); the formats register what they compute,
    ``least_overlap`` and ``shared_mass``, under names of their own."""
    assert not hasattr(operators, "mixing_rate_part")
    assert not hasattr(operators, "doeblin_lower_bound")
    T = np.full((5, 5), 0.2)
    assert doeblin_lower_bound(T) == min(1.0, operators.shared_mass(T))
    assert mixing_rate_part(T, 1, 2) == operators.least_overlap(T, np.array([1, 3]))


def test_the_structured_doeblin_bound_finds_each_columns_least_row_off_the_pattern():
    """Rows by ascending ``u``: 1, 2, 0. Column 0 is stored in rows 1 and 2, and its least
    entry is row 0's background; column 1 is stored in every row; column 2 in none."""
    S = sp.csr_array(np.array([[0.0, 0.05, 0.0], [0.5, 0.02, 0.0], [0.5, 0.04, 0.0]]))
    M = SparsePlusRankOne(S, np.array([0.3, 0.1, 0.2]), np.array([1.0, 2.0, 0.5]))
    dense = M.toarray()
    assert dense.argmin(axis=0).tolist() == [0, 1, 1]
    assert doeblin_lower_bound(M) == pytest.approx(0.3 + 0.22 + 0.05, abs=1e-15)
    assert doeblin_lower_bound(M) == pytest.approx(dense.min(axis=0).sum(), abs=1e-15)


def test_bad_entries_are_named(wide):
    T, dense = wide
    broken = dense.copy()
    column = int(np.flatnonzero(broken[3])[0])
    broken[3, column] = -0.25
    if isinstance(T, np.ndarray):
        bad = broken
    elif isinstance(T, sp.csr_array):
        bad = sp.csr_array(broken)
    elif isinstance(T, LowRank):
        bad = LowRank(T.left, T.right, sp.csr_array(([-0.25], ([3], [column])), shape=T.shape))
    else:
        bad = SparsePlusRankOne(T.sparse, T.u, T.v)
        bad.sparse.data[bad.sparse.indptr[3]] = -1.0
        column = int(bad.sparse.indices[bad.sparse.indptr[3]])
    with pytest.raises(ValueError, match=rf"^E\[3, {column}\] = -"):
        operators.check_entries(bad, "E")


def test_structured_factors_must_be_non_negative():
    M = random_structured(1, 6, 6)
    with pytest.raises(ValueError, match=r"transition\.u\[0\] = -"):
        HMM(np.ones(6) / 6, SparsePlusRankOne(M.sparse, -M.u, M.v), np.eye(6))
    with pytest.raises(ValueError, match="transition row 0 sums to"):
        HMM(np.ones(6) / 6, SparsePlusRankOne(M.sparse * 0.5, M.u, M.v), np.eye(6))
    with pytest.raises(ValueError, match="do not fit"):
        SparsePlusRankOne(M.sparse, M.u[:3], M.v)


def test_factor_doeblin_bound_is_below_the_doeblin_bound():
    for M in (random_low_rank(2, 60, 60), random_low_rank(3, 60, 60, rank=2, delta=4)):
        exact = M.toarray().min(axis=0).sum()
        assert 0 < factor_doeblin_bound(M) <= exact + 1e-15
    rank_one = random_low_rank(4, 30, 30, rank=1)
    assert factor_doeblin_bound(rank_one) == pytest.approx(rank_one.toarray().min(axis=0).sum())


def test_low_rank_shapes_and_factors_are_checked():
    M = random_low_rank(1, 6, 6, rank=2)
    with pytest.raises(ValueError, match=r"transition\.left\[0, 1\] = -"):
        HMM(np.ones(6) / 6, LowRank(M.left * [1, -1], M.right), np.eye(6))
    with pytest.raises(ValueError, match="must be"):
        LowRank(M.left, M.right[:, :1])
    with pytest.raises(ValueError, match="band has shape"):
        LowRank(M.left, M.right, sp.csr_array((3, 6)))


def test_structured_zeros_count_as_zeros():
    zeros = SparsePlusRankOne(
        sp.csr_array(np.diag([0.5, 0.0, 1.0])), np.array([0.5, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])
    )
    assert operators.count_nonzero(zeros) == np.count_nonzero(zeros.toarray()) == 3


def test_peaks_of_a_structured_matrix():
    M = random_structured(7, 12, 15, constant_v=True)
    dense = M.toarray()
    found = operators.peaks(M)
    background = M.u * M.v[0]
    above = dense > background[:, None]
    np.testing.assert_allclose(found.background, background)
    np.testing.assert_array_equal(found.count, above.sum(axis=1))
    np.testing.assert_allclose(found.mass, np.where(above, dense, 0).sum(axis=1), atol=1e-15)
    assert operators.peaks(random_structured(7, 12, 15, constant_v=False)) is None
    assert operators.peaks(dense) is None


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
    np.testing.assert_allclose(structured.transition.toarray(), dense.transition, atol=1e-15)
    np.testing.assert_array_equal(structured.prior, dense.prior)


@pytest.mark.parametrize("family", ["kernel", "banded_kernel"])
def test_kernel_families_filter_like_their_materialised_matrices(family):
    hmm = build_model(family, 64, seed=1, n_features=8, n_observations=10)
    dense = HMM(hmm.prior, operators.toarray(hmm.transition), operators.toarray(hmm.emission))
    observations = np.random.default_rng(2).integers(-1, 10, size=(3, 25))
    for batch in (observations, observations[0]):
        a, b = filtering(hmm, batch), filtering(dense, batch)
        np.testing.assert_allclose(a.beliefs, b.beliefs, atol=1e-12)
        np.testing.assert_allclose(a.log_evidence, b.log_evidence, rtol=1e-10)


def test_a_large_low_rank_matrix_gets_the_factor_bound_not_a_dense_pair_search():
    hmm = build_model("kernel", 6000, n_features=2, n_observations=4)
    with pytest.raises(ValueError, match="use its Doeblin lower bound instead"):
        mixing_rate_part(hmm.transition, 0, 100)
    assert doeblin_lower_bound(hmm.transition) == factor_doeblin_bound(hmm.transition) > 0
    assert gamma_exact_max_states("kernel") == 5000 < gamma_exact_max_states("bell")


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread here")
def test_a_low_rank_matrix_reads_more_entries_than_a_block_in_blocks():
    # 512^2 positions of rank 64: 2^18 entries, 2^24 factor numbers, 16 blocks of 2^20.
    T = build_model("kernel", 512, seed=1, n_features=64).transition
    row, column = np.divmod(np.arange(512 * 512), 512)
    tracemalloc.start()  # numpy reports its arrays' memory to tracemalloc
    try:
        values = operators.entries_at(T, row, column)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**26  # all factor rows at once would be 2 x 2^24 float64 (256 MiB)
    np.testing.assert_array_equal(values, np.einsum("kf,kf->k", T.left[row], T.right[column]))
    np.testing.assert_allclose(values, T.toarray().ravel(), rtol=1e-12)


def test_the_parallel_csr_step_equals_the_serial_and_dense_ones():
    """Above PARALLEL_ENTRIES stored entries a step uses every numba thread: each thread
    scatters its share of the rows, the copies are summed. The beliefs must not change."""
    rng = np.random.default_rng(3)
    T = random_stochastic(rng, 400, 400, zeros=0.5)
    assert np.count_nonzero(T) >= forward.PARALLEL_ENTRIES
    E = random_stochastic(rng, 400, 7)
    prior = rng.dirichlet(np.ones(400))
    observations = rng.integers(-1, 7, size=30)
    dense = filtering(HMM(prior, T, E), observations)
    for matrix in (
        sp.csr_array(T),
        SparsePlusRankOne(sp.csr_array(T * 0.9), np.full(400, 0.1 / 400), np.ones(400)),
    ):
        reference = (
            dense
            if isinstance(matrix, sp.csr_array)
            else filtering(HMM(prior, matrix.toarray(), E), observations)
        )
        hmm = HMM(prior, matrix, E)
        before = numba.get_num_threads()
        try:
            numba.set_num_threads(1)
            serial = filtering(hmm, observations)
            numba.set_num_threads(2)
            assert forward.step_threads(hmm.transition_layout) == 2
            assert forward.step_threads(HMM(prior, T, E).transition_layout) == 1  # dense
            parallel = filtering(hmm, observations)
        finally:
            numba.set_num_threads(before)
        np.testing.assert_allclose(parallel.beliefs, reference.beliefs, atol=1e-12)
        np.testing.assert_allclose(parallel.beliefs, serial.beliefs, atol=1e-14)


def test_the_prefetching_step_sums_as_the_plain_scatter_to_the_last_bit():
    """From PREFETCH_STATES states on, the CSR step asks for each entry's output line ahead:
    a hint only, so every output must be the plain scatter's to the last bit, and the
    parallel step with it the scipy product's."""
    rng = np.random.default_rng(5)
    n = forward.PREFETCH_STATES
    rows, columns = np.repeat(np.arange(n), 12), rng.integers(0, n, size=12 * n)
    S = sp.csr_array((rng.random(12 * n), (rows, columns)), shape=(n, n))
    hmm = HMM(np.full(n, 1 / n), S / S.sum(axis=1)[:, None], np.full((n, 2), 0.5))
    layout = hmm.transition_layout
    indptr, indices, data = layout.indptr, layout.indices, layout.data
    entry_rows = np.repeat(np.arange(n), np.diff(indptr))
    for zeros in (0.3, 0.7):  # the plain steps' two loops: over entries, over rows
        belief = rng.random(n) * (rng.random(n) >= zeros)
        far, rows_out, entries_out = np.empty(n), np.empty(n), np.empty(n)
        forward.step(layout, belief, far, 1)
        forward._scatter_rows(indptr, indices, data, belief, rows_out)
        forward._scatter_entries(indptr, indices, data, entry_rows, belief, entries_out)
        assert np.array_equal(far, rows_out) and np.array_equal(far, entries_out)
        np.testing.assert_allclose(far, hmm.transition.T @ belief, rtol=1e-12)
    belief, parallel = rng.random(n), np.empty(n)  # the parallel step: no zeros
    forward.step(layout, belief, parallel, 2)
    np.testing.assert_allclose(parallel, hmm.transition.T @ belief, rtol=1e-12)


@pytest.mark.parametrize("tile", [1, 3, 7, 50, 1000])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_the_tiled_block_step_equals_the_dense_product(tile, order):
    """The block step of long rows writes its output ``tile`` rows at a time, resuming each
    row of S where the previous tile stopped: empty rows, empty columns, a last tile shorter
    than the others and column indices in any order within a row must not change the
    product, and with sorted indices it sums each output entry in the untiled step's order."""
    rng = np.random.default_rng(tile)
    dense = random_stochastic(rng, 60, 45, zeros=0.6)
    dense[[4, 17, 59]] = 0.0  # empty rows
    dense[:, [0, 22, 44]] = 0.0  # empty columns, the first and the last among them
    S = sp.csr_array(dense)
    assert np.diff(S.indptr)[[4, 17, 59]].sum() == 0 and not np.isin(S.indices, [0, 22, 44]).any()
    if order == "shuffled":
        for i in range(60):
            row = slice(S.indptr[i], S.indptr[i + 1])
            shuffle = rng.permutation(S.indptr[i + 1] - S.indptr[i])
            S.indices[row], S.data[row] = S.indices[row][shuffle], S.data[row][shuffle]
    block = rng.random((60, 5))
    out, untiled = np.full((45, 5), np.nan), np.full((45, 5), np.nan)
    forward._csr_block_tiled(S.indptr, S.indices, S.data, block, out, tile)
    forward._csr_block(S.indptr, S.indices, S.data, block, untiled)
    np.testing.assert_allclose(out, dense.T @ block, rtol=1e-13, atol=1e-15)
    if order == "sorted":
        np.testing.assert_array_equal(out, untiled)


def test_a_wide_batch_of_long_rows_takes_the_tiled_step_and_equals_the_dense_one():
    """2,100 states and 64 members: an output of 1.1 MB, more than two tiles
    (``BLOCK_TILE``), so each step runs in three tiles of columns."""
    rng = np.random.default_rng(4)
    n, size = 2100, 64
    indices = np.sort(np.argsort(rng.random((n, n)), axis=1)[:, :80], axis=1)
    S = sp.csr_array(
        (rng.random(n * 80), indices.ravel(), np.arange(0, n * 80 + 1, 80)), shape=(n, n)
    )
    S = sp.csr_array(S / S.sum(axis=1)[:, None])
    assert n * size * 8 > 2 * forward.BLOCK_TILE and isinstance(
        operators.layout(S), forward.CsrRows
    )
    E = random_stochastic(rng, n, 5)
    initial = rng.dirichlet(np.ones(n), size=size)
    observations = rng.integers(-1, 5, size=(size, 4))
    sparse = filtering(HMM(initial[0], S, E), observations, initial=initial)
    dense = filtering(HMM(initial[0], S.toarray(), E), observations, initial=initial)
    np.testing.assert_allclose(sparse.beliefs, dense.beliefs, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(sparse.log_evidence, dense.log_evidence, rtol=1e-12)


def test_mostly_full_columns_are_stepped_as_a_dense_panel():
    """Columns with at least 2/3 of their entries stored go into a dense panel (BLAS) when
    they hold enough entries; the rest, empty rows included, is scattered. Every step, from
    full, half-empty and nearly empty beliefs (the panel's gather path), one by one and in
    batches, plain and under a rank-one part, with pruning and on two threads, must equal
    the dense matrix's."""
    rng = np.random.default_rng(11)
    n = 400
    dense = random_stochastic(rng, n, n, zeros=0.7)
    full = rng.permutation(n)[:150]
    dense[:, full] = rng.random((n, 150)) * (rng.random((n, 150)) < 0.9)
    dense[[3, 70, 399]] = 0.0
    dense[[3, 70, 399], 5] = 1.0
    dense /= dense.sum(axis=1, keepdims=True)
    S = sp.csr_array(dense)
    counts = np.count_nonzero(dense, axis=0)
    layout = operators.layout(S)
    assert isinstance(layout, forward.CsrPanel) and layout.panel.flags.c_contiguous
    np.testing.assert_array_equal(layout.columns, np.flatnonzero(3 * counts >= 2 * n))
    assert set(full) <= set(layout.columns) and layout.rest.data.size > 0
    bell = topp_hmm(build_model("bell", 800), 0.9).transition  # short rows: no full column
    assert isinstance(operators.layout(bell), forward.CsrEntries)

    out = np.empty(n)
    for nonzero in (n, n // 2, n // 40):  # BLAS over the panel, then its gather path
        belief = np.zeros(n)
        belief[rng.permutation(n)[:nonzero]] = rng.random(nonzero)
        forward.step(layout, belief, out, 1)
        np.testing.assert_allclose(out, belief @ dense, rtol=1e-12, atol=1e-16)
    block, out = rng.random((n, 6)), np.empty((n, 6))
    forward.step_block(layout, block, out)
    np.testing.assert_allclose(out, dense.T @ block, rtol=1e-12)

    E = random_stochastic(rng, n, 7)
    prior = rng.dirichlet(np.ones(n))
    observations = rng.integers(-1, 7, size=(3, 20))
    structured = SparsePlusRankOne(sp.csr_array(dense * 0.9), np.full(n, 0.1 / n), np.ones(n))
    assert isinstance(operators.layout(structured).sparse, forward.CsrPanel)

    # The backward and max-product steps read the panel too, plain and under a rank-one part.
    message, gathered = rng.random(n), np.empty(n)
    backward.step(layout, message, gathered)
    np.testing.assert_allclose(gathered, dense @ message, rtol=1e-12)
    block, out = rng.random((n, 6)), np.empty((n, 6))
    backward.step_block(layout, block, out)
    np.testing.assert_allclose(out, dense @ block, rtol=1e-12)
    for matrix in (S, structured):
        full_matrix = operators.toarray(matrix)
        for weights in (rng.random(n), random_weights(rng, n)):
            values, states = np.empty(n), np.empty(n, np.int64)
            maxproduct.step(operators.layout(matrix), weights, values, states)
            products = weights[:, None] * full_matrix
            np.testing.assert_array_equal(states, products.argmax(axis=0))
            np.testing.assert_allclose(values, products.max(axis=0), rtol=1e-14)
    before = numba.get_num_threads()
    try:
        for threads in {1, min(2, numba.config.NUMBA_NUM_THREADS)}:
            numba.set_num_threads(threads)
            assert forward.step_threads(layout) == 1  # BLAS's threads step the panel
            for matrix in (S, structured):
                reference = HMM(prior, operators.toarray(matrix), E)
                for prune in (1.0, 0.7):
                    for batch in (observations, observations[1]):
                        a = filtering(HMM(prior, matrix, E), batch, prune=prune)
                        b = filtering(reference, batch, prune=prune)
                        np.testing.assert_allclose(a.beliefs, b.beliefs, atol=1e-12)
                        np.testing.assert_allclose(a.log_evidence, b.log_evidence, rtol=1e-10)
    finally:
        numba.set_num_threads(before)
