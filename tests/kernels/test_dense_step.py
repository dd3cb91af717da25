from fractions import Fraction

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from pipeline.inference import filtering
from pipeline.kernels import forward
from pipeline.testing.random_models import random_hmm


def _fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once: the exact value, rounded to the nearest float."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def _blas_order(T: np.ndarray, belief: np.ndarray) -> np.ndarray:
    """``belief @ T`` summed as ``forward._vector_matrix``'s docstring says, one output at
    a time, written out literally."""
    n, m = T.shape
    wide = m - m % 4
    out = np.empty(m)
    for j in range(wide):
        total, i = 0.0, 0
        while i + 4 <= n:
            group = _fma(T[i, j], belief[i], T[i + 1, j] * belief[i + 1])
            group = _fma(T[i + 2, j], belief[i + 2], group)
            total = total + _fma(T[i + 3, j], belief[i + 3], group)
            i += 4
        if i + 2 <= n:
            total = total + _fma(T[i, j], belief[i], T[i + 1, j] * belief[i + 1])
            i += 2
        if i < n:
            total = total + T[i, j] * belief[i]
        out[j] = total
    for j in range(wide, m):
        total = 0.0
        for k in range(n):
            total = _fma(T[k, j], belief[k], total)
        out[j] = total
    return out


@pytest.mark.parametrize(
    ("n", "m"),
    [(n, m) for n in (1, 2, 3, 4, 6, 7, 12, 16, 19, 35, 50) for m in (4, 7, 9, 18)] + [(13, 512)],
)
def test_the_dense_product_sums_in_the_order_it_documents(n, m):
    """Every branch: passes of 16 rows, of 8 (and only those where the rows lie 4 KiB apart,
    512 columns), single groups of four, two and one rows left over, and the last ``m % 4``
    columns; the same numbers to the last bit, not merely close."""
    rng = np.random.default_rng(n * 1000 + m)
    T, belief = rng.random((n, m)), rng.random(n)
    out = np.empty(m)
    forward._vector_matrix(T, belief, out)
    np.testing.assert_array_equal(out, _blas_order(T, belief))


def _skylakex_openblas() -> bool:
    return any(
        pool["internal_api"] == "openblas"
        and pool.get("architecture") in ("SkylakeX", "Cooperlake", "SapphireRapids")
        for pool in threadpool_info()
    )


@pytest.mark.skipif(
    not _skylakex_openblas(), reason="the step's order is that of OpenBLAS's AVX-512 kernel"
)
@pytest.mark.parametrize("shape", [(400, 400), (363, 365), (402, 1001)])
def test_a_dense_step_gives_the_blas_products_beliefs_to_the_last_bit(shape):
    """A step large enough for the compiled product (``DENSE_BLAS``) gives what BLAS's one
    thread gave, so filtering's beliefs and every store made from them are unchanged."""
    rng = np.random.default_rng(shape[1])
    T, belief = rng.random(shape), rng.random(shape[0])
    assert T.size >= forward.DENSE_BLAS
    out = np.empty(shape[1])
    forward.step(forward.Dense(T), belief, out, 1)
    with threadpool_limits(limits=1, user_api="blas"):
        np.testing.assert_array_equal(out, belief @ T)


def test_a_dense_batch_steps_its_members_as_rows_and_prunes_each_of_them():
    """A dense batch's history is member-major (each member's belief at a step one
    contiguous row, as BLAS multiplies it); conditioning and pruning read those rows, so
    every member filters as it does alone, and the last step kept alone is the history's."""
    hmm = random_hmm(5, 30, 4, zeros=0.3)
    assert forward.members_first(hmm.transition_layout)
    rng = np.random.default_rng(3)
    initial = rng.dirichlet(np.ones(30), size=5)
    observations = rng.integers(-1, 4, size=(5, 9))
    batch = filtering(hmm, observations, initial=initial, prune=0.8)
    assert batch.beliefs[:, 4].flags.c_contiguous  # step 4 of every member: one block
    for b in range(5):
        alone = filtering(hmm, observations[b], initial=initial[b], prune=0.8)
        np.testing.assert_allclose(batch.beliefs[b], alone.beliefs, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(batch.pruned[b], alone.pruned, rtol=1e-9, atol=1e-15)
        assert batch.log_evidence[b] == pytest.approx(alone.log_evidence, rel=1e-12)
    last = filtering(hmm, observations, initial=initial, prune=0.8, history=False)
    np.testing.assert_array_equal(last.beliefs, batch.beliefs[:, -1:])
