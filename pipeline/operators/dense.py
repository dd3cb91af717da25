"""Dense matrices: ``numpy.ndarray`` (n, m), float64, C-contiguous.

An exact step is one matrix-vector product, O(n m) (``pipeline.kernels.forward``: compiled,
in the order of BLAS's sums); from a belief with few non-zero states it reads only their
rows.
"""

from __future__ import annotations

import numpy as np

from pipeline.kernels import forward, gamma
from pipeline.operators import base


@base.as_operator.register
def _(matrix: np.ndarray, name: str = "matrix") -> np.ndarray:
    base.check_real(matrix, name)
    dense = np.ascontiguousarray(matrix, dtype=np.float64)
    if dense.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {dense.shape}")
    return dense


@base.check_entries.register
def _(T: np.ndarray, name: str, *, vector: bool = False) -> None:
    bad = ~np.isfinite(T) | (T < 0)
    if bad.any():
        row, column = (int(k) for k in np.argwhere(bad)[0])
        raise base.bad_entry(name, row, column, T[row, column], vector=vector)


@base.row_sums.register
def _(T: np.ndarray) -> np.ndarray:
    return T.sum(axis=1)


@base.rows.register
def _(T: np.ndarray, start: int, stop: int) -> np.ndarray:
    return T[start:stop]


@base.columns.register
def _(T: np.ndarray, which: np.ndarray) -> np.ndarray:
    return T[:, which]


@base.entries_at.register
def _(T: np.ndarray, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    return T[row, column]


@base.toarray.register
def _(T: np.ndarray) -> np.ndarray:
    return T


@base.stored_entries.register
def _(T: np.ndarray) -> int:
    return int(T.size)


@base.count_nonzero.register
def _(T: np.ndarray) -> int:
    return int(np.count_nonzero(T))


@base.step_work.register
def _(T: np.ndarray, support: np.ndarray) -> int:
    return int(np.count_nonzero(support)) * T.shape[1]


@base.layout.register
def _(T: np.ndarray) -> forward.Dense:
    return forward.Dense(T)


@base.backward_product.register
def _(T: np.ndarray, messages) -> np.ndarray:
    messages = base.as_vectors(messages, T.shape[1], "messages")
    return base.run_backward(forward.Dense(T), messages, T.shape[0])


@base.max_product.register
def _(T: np.ndarray, weights) -> base.MaxProduct:
    weights = base.as_vectors(weights, T.shape[0], "weights")
    return base.run_max_product(forward.Dense(T), weights, T.shape[1])


@base.expected_counts.register
def _(T: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    counts = before.T @ after  # (n, n): one product, then weighted in place
    counts *= T
    return counts


@base.column_sampler.register
def _(T: np.ndarray) -> base.Sampler:
    step = max(1, base.BLOCK_ENTRIES // max(T.shape[1], 1))

    def draw(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        parts = [base.draw_dense(T[rows[k : k + step]], rng) for k in range(0, rows.size, step)]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    return draw


@base.least_overlap.register
def _(T: np.ndarray, which: np.ndarray) -> float:
    return float(gamma.pairs_dense(T, which, np.inf))


@base.shared_mass.register
def _(T: np.ndarray) -> float:
    return float(T.min(axis=0).sum())


@base.row_blocks.register
def _(T: np.ndarray, direct: np.ndarray | None = None) -> list:
    step = max(1, base.BLOCK_ENTRIES // max(T.shape[1], 1))
    return [
        (lambda start=start: base.DenseRows(T[start : start + step]))
        for start in range(0, T.shape[0], step)
    ]
