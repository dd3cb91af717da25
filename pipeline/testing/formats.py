"""The contract every matrix format passes: each operation of ``pipeline.operators.base``
equals the same on the dense matrix.

A format is given by a factory, ``factory(seed, n, m) -> (matrix, dense)``: a random
row-stochastic ``n x m`` matrix in the format, made from ``seed``, and its dense ndarray of
shape (n, m) (made independently of the format's ``toarray``, which is checked). Each check
builds an 80 x 80 transition-shaped matrix (seed 3) and an 80 x 9 emission-shaped one
(seed 4), and raises ``AssertionError`` naming what differs; ``check_format`` runs them all.

>>> import numpy as np
>>> from pipeline.testing import check_format
>>> def dense(seed, n, m):
...     T = np.random.default_rng(seed).random((n, m))
...     T /= T.sum(axis=1, keepdims=True)
...     return T, T
>>> check_format(dense)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline import operators
from pipeline.hmm import HMM
from pipeline.inference import filtering
from pipeline.kernels import backward, maxproduct
from pipeline.metrics import doeblin_lower_bound, minimal_mixing_rate, mixing_rate_part, sparsity

Factory = Callable[[int, int, int], tuple[Any, np.ndarray]]
"""``factory(seed, n, m) -> (matrix, dense)``: a random row-stochastic (n, m) matrix in the
format and the same as a dense ndarray."""

SQUARE, WIDE = (3, 80, 80), (4, 80, 9)
"""The seed and shape of the transition-shaped and the emission-shaped matrix."""

RTOL, ATOL = 1e-12, 1e-15
"""How close a product must be to the dense one (floating-point sums in another order)."""


def raises(error: type[Exception], pattern: str, function: Callable, *args: Any) -> None:
    """Assert that ``function(*args)`` raises ``error`` whose message matches ``pattern``."""
    try:
        function(*args)
    except error as raised:
        assert re.search(pattern, str(raised)), f"{raised!r} does not match {pattern!r}"
        return
    raise AssertionError(f"{getattr(function, '__name__', function)} raised no {error.__name__}")


def brute_force_gamma(T: np.ndarray) -> float:
    """The minimal mixing rate ``min_{i != k} sum_j min(T[i, j], T[k, j])`` of a dense
    matrix ``T`` (n, m), by every pair of rows."""
    n = len(T)
    return min(np.minimum(T[i], T[k]).sum() for i in range(n) for k in range(n) if i != k)


def random_weights(rng: np.random.Generator, n: int) -> np.ndarray:
    """Weights over n states with about a third exactly zero (the steps skip those rows)."""
    return rng.random(n) * (rng.random(n) > 0.3)


def check_views(factory: Factory) -> None:
    """``toarray``, ``row_sums``, ``rows``, ``columns``, ``entries_at`` and
    ``count_nonzero`` equal the dense matrix's."""
    T, dense = factory(*WIDE)
    np.testing.assert_allclose(operators.toarray(T), dense, atol=1e-15)
    np.testing.assert_allclose(operators.row_sums(T), dense.sum(axis=1), atol=1e-14)
    np.testing.assert_allclose(operators.rows(T, 3, 11), dense[3:11], atol=1e-15)
    np.testing.assert_allclose(operators.columns(T, np.array([0, 4, 8])), dense[:, [0, 4, 8]])
    where = np.array([1, 5, 79]), np.array([2, 8, 0])
    np.testing.assert_allclose(operators.entries_at(T, *where), dense[where], atol=1e-15)
    assert operators.count_nonzero(T) == np.count_nonzero(dense)
    expected = 1 - np.count_nonzero(dense) / dense.size
    assert np.isclose(sparsity(T), expected), (sparsity(T), expected)


def check_products(factory: Factory) -> None:
    """``x @ T`` (a scatter) and ``T @ y`` (a gather), of one vector and of a batch, through
    the operations and through the compiled steps of the format's layout, which the
    recursions take, on both shapes; ``batch_products`` gives the same; a message of the
    wrong length is refused naming its shape; the format is ``compiled``."""
    for seed, *shape in (SQUARE, WIDE):
        T, dense = factory(seed, *shape)
        rng = np.random.default_rng(8)
        x, X = random_weights(rng, shape[0]), rng.random((5, shape[0]))
        y, Y = rng.random(shape[1]), rng.random((5, shape[1]))
        np.testing.assert_allclose(operators.forward_product(T, x), x @ dense, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(operators.forward_product(T, X), X @ dense, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(
            operators.backward_product(T, y), dense @ y, rtol=RTOL, atol=ATOL
        )
        np.testing.assert_allclose(
            operators.backward_product(T, Y), Y @ dense.T, rtol=RTOL, atol=ATOL
        )
        layout = operators.layout(T)
        out, block = np.empty(shape[0]), np.empty((shape[0], 5))
        backward.step(layout, y, out)
        backward.step_block(layout, np.ascontiguousarray(Y.T), block)
        np.testing.assert_allclose(out, dense @ y, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(block, dense @ Y.T, rtol=RTOL, atol=ATOL)
        products = operators.batch_products(T)
        np.testing.assert_array_equal(products.forward(X), operators.forward_product(T, X))
        np.testing.assert_array_equal(products.backward(Y), operators.backward_product(T, Y))
        wrong = np.ones(shape[1] + 1)
        pattern = rf"messages must have shape \({shape[1]},\)"
        raises(ValueError, pattern, operators.backward_product, T, wrong)
        assert operators.compiled(T), "the recursions run its whole horizon in compiled code"


def check_max_product(factory: Factory) -> None:
    """``max_i w[i] T[i, j]`` and its least maximising state, from one weight vector and a
    batch, through the operation and the compiled step of the format's layout."""
    for seed, *shape in (SQUARE, WIDE):
        T, dense = factory(seed, *shape)
        rng = np.random.default_rng(9)
        products = [random_weights(rng, shape[0]) for _ in range(3)]
        for w in products:
            found = operators.max_product(T, w)
            expected = w[:, None] * dense
            np.testing.assert_allclose(found.values, expected.max(axis=0), rtol=1e-14)
            np.testing.assert_array_equal(found.states, expected.argmax(axis=0))
            values, states = np.empty(shape[1]), np.empty(shape[1], np.int64)
            maxproduct.step(operators.layout(T), w, values, states)
            np.testing.assert_array_equal(states, found.states)
            np.testing.assert_allclose(values, found.values, rtol=1e-14)
        batch = operators.max_product(T, np.stack(products))
        assert batch.values.shape == batch.states.shape == (3, shape[1]), batch.values.shape
        single = operators.max_product(T, products[1]).states
        np.testing.assert_array_equal(batch.states[1], single)


def check_expected_counts(factory: Factory) -> None:
    """``T * (before.T @ after)``, the expected transition counts of EM, for a batch of six
    forward and backward vectors."""
    T, dense = factory(*SQUARE)
    rng = np.random.default_rng(10)
    before, after = rng.random((6, 80)), rng.random((6, 80))
    counts = operators.expected_counts(T, before, after)
    expected = dense * (before.T @ after)
    np.testing.assert_allclose(operators.toarray(counts), expected, rtol=1e-12, atol=1e-15)


def check_column_sampler(factory: Factory) -> None:
    """Chi-square of 6,000 draws from each of three rows against the dense row, at a fixed
    seed (p-value above 1e-3); every drawn column has non-zero probability."""
    from scipy import stats

    T, dense = factory(*WIDE)
    draw = operators.column_sampler(T)
    rng = np.random.default_rng(11)
    for row in (0, 17, 79):
        drawn = draw(np.full(6000, row), rng)
        assert drawn.dtype == np.int64 and (dense[row, drawn] > 0).all(), row
        observed = np.bincount(drawn, minlength=9)
        expected = 6000 * dense[row] / dense[row].sum()
        kept = expected > 0
        assert stats.chisquare(observed[kept], expected[kept]).pvalue > 1e-3, (row, observed)


def check_filtering(factory: Factory, emission: Factory | None = None, prune: float = 1.0) -> None:
    """Filtering (``pipeline.inference.filtering``) with the format's transitions and
    ``emission``'s emissions (the format's own by default) equals filtering with the dense
    matrices: one sequence and a batch of four, with missing observations, pruned to mass
    ``prune``."""
    T, dense_T = factory(*SQUARE)
    E, dense_E = (emission or factory)(*WIDE)
    prior = np.random.default_rng(5).dirichlet(np.ones(80))
    formatted, plain = HMM(prior, T, E), HMM(prior, dense_T, dense_E)
    observations = np.random.default_rng(6).integers(-1, 9, size=(4, 16))
    for batch in (observations, observations[1]):
        a = filtering(formatted, batch, prune=prune)
        b = filtering(plain, batch, prune=prune)
        np.testing.assert_allclose(a.beliefs, b.beliefs, atol=1e-12)
        np.testing.assert_allclose(a.log_evidence, b.log_evidence, rtol=1e-10)
        np.testing.assert_allclose(a.pruned, b.pruned, atol=1e-12)
    single = filtering(formatted, observations[2], prune=prune)
    batched = filtering(formatted, observations, prune=prune)
    np.testing.assert_allclose(single.beliefs, batched.beliefs[2], atol=1e-13)


def check_gamma(factory: Factory) -> None:
    """The minimal mixing rate, its parts and the Doeblin lower bound equal the dense
    matrix's (``brute_force_gamma``, the least column sums)."""
    T, dense = factory(*SQUARE)
    expected = brute_force_gamma(dense)
    np.testing.assert_allclose(minimal_mixing_rate(T), expected, rtol=0, atol=1e-12)
    parts = min(mixing_rate_part(T, k, 3) for k in range(3))
    np.testing.assert_allclose(parts, expected, rtol=0, atol=1e-12)
    least = dense.min(axis=0).sum()
    np.testing.assert_allclose(doeblin_lower_bound(T), least, rtol=0, atol=1e-12)


CHECKS: tuple[Callable[[Factory], None], ...] = (
    check_views,
    check_products,
    check_max_product,
    check_expected_counts,
    check_column_sampler,
    check_filtering,
    check_gamma,
)
"""Every check of a format, each a function of its factory."""


def check_format(factory: Factory) -> None:
    """Run every check of ``CHECKS`` on the format ``factory`` makes, and filtering with
    belief pruning besides; the first that fails raises ``AssertionError``."""
    for check in CHECKS:
        check(factory)
    check_filtering(factory, prune=0.8)
