"""Low-rank matrices, optionally with a band kept exactly: the transitions of kernel HMMs.

A generalised softmax with a finite feature map (Chiu, Deng, Rush, "Scaling Hidden
Markov Language Models", Section 4) makes the transition matrix
``diag(d) phi(U) phi(V)^T``: a non-negative rank-F product, so a step costs
O(n F) instead of O(n^2) and the n x n matrix never exists. Section 7 keeps a
band ``|i - j| < delta`` of separately parameterised entries and normalises
band and kernel together; the band's entries replace the kernel's there.

``LowRank(left, right, band)`` is that matrix: entry ``(i, j)`` is
``band[i, j]`` where ``band`` stores an entry, else ``left[i] . right[j]``.
Without a band it is the plain product ``left @ right.T``. A step computes
``(belief @ left) @ right.T`` (two thin BLAS products) and corrects the
band's positions with a sparse scatter, O(n (F + delta)).

Its namesake ``pipeline.methods.lowrank`` is the approximation method that fits a matrix of
this format to any model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline.kernels import draw, forward, gamma
from pipeline.operators import base
from pipeline.operators.csr import RowDraws, canonical, csr_layout, entry_rows, entry_sums

MAX_DENSE = 25_000_000
"""The exact minimal mixing rate and the max-product step of a ``LowRank`` matrix generate
every entry (the step one block of rows at a time, every step); both refuse above this many
entries (200 MB, n = 5000)."""


@dataclass(frozen=True, eq=False)
class LowRank:
    """The matrix ``left @ right.T`` with the stored entries of ``band`` in place, (n, m).

    Parameters
    ----------
    left : ndarray, shape (n, F)
        Non-negative row factors, e.g. ``diag(d) phi(U)`` (the normalisers folded in).
    right : ndarray, shape (m, F)
        Non-negative column factors, e.g. ``phi(V)``.
    band : csr_array, shape (n, m), optional
        Entries kept exactly: where ``band`` stores a value (zero included), the
        matrix has that value instead of the product's. Default none.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> band = sp.csr_array(([0.9, 0.0], [0, 1], [0, 1, 2]), shape=(2, 2))  # a stored zero
    >>> M = LowRank(np.full((2, 1), 0.5), np.ones((2, 1)), band)
    >>> M.toarray()
    array([[0.9, 0.5],
           [0.5, 0. ]])
    """

    left: np.ndarray
    right: np.ndarray
    band: sp.csr_array = None  # None: no band, an empty csr_array from __post_init__ on

    def __post_init__(self) -> None:
        base.check_real(self.left, "left")
        base.check_real(self.right, "right")
        left = np.ascontiguousarray(self.left, dtype=np.float64)
        right = np.ascontiguousarray(self.right, dtype=np.float64)
        if left.ndim != 2 or right.ndim != 2 or left.shape[1] != right.shape[1]:
            raise ValueError(f"left {left.shape} and right {right.shape} must be (n, F) and (m, F)")
        shape = (left.shape[0], right.shape[0])
        band = sp.csr_array(shape) if self.band is None else canonical(self.band, "band")
        if band.shape != shape:
            raise ValueError(f"band has shape {band.shape}; the factors make {shape}")
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "band", band)

    @property
    def shape(self) -> tuple[int, int]:
        return self.left.shape[0], self.right.shape[0]

    ndim = 2

    @property
    def rank(self) -> int:
        """The feature dimension F of the factors."""
        return self.left.shape[1]

    def product_at_band(self) -> np.ndarray:
        """``left[i] . right[j]`` at each stored band position, shape (band.nnz,)."""
        rows = entry_rows(self.band.indptr)
        return np.einsum("kf,kf->k", self.left[rows], self.right[self.band.indices])

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a dense array, shape (stop - start, m)."""
        block = self.left[start:stop] @ self.right.T
        part = self.band[start:stop]
        block[entry_rows(part.indptr), part.indices] = part.data
        return block

    def toarray(self) -> np.ndarray:
        """The whole matrix, dense, shape (n, m): for small n."""
        return self.rows(0, self.shape[0])


def band_pattern(n: int, delta: int) -> sp.csr_array:
    """The positions ``|i - j| < delta`` of an n x n matrix, as a CSR array of ones."""
    if delta < 1:
        return sp.csr_array((n, n))
    offsets = list(range(-delta + 1, delta))
    return sp.csr_array(sp.diags_array([1.0] * len(offsets), offsets=offsets, shape=(n, n)))


@base.as_operator.register
def _(matrix: LowRank, name: str = "matrix") -> LowRank:
    return matrix


@base.check_entries.register
def _(T: LowRank, name: str, *, vector: bool = False) -> None:
    base.check_factors(name, left=T.left, right=T.right)
    base.check_entries(T.band, name, vector=vector)


@base.row_sums.register
def _(T: LowRank) -> np.ndarray:
    n = T.shape[0]
    rows = entry_rows(T.band.indptr)
    correction = np.bincount(rows, weights=T.band.data - T.product_at_band(), minlength=n)
    return T.left @ T.right.sum(axis=0) + correction


@base.rows.register
def _(T: LowRank, start: int, stop: int) -> np.ndarray:
    return T.rows(start, stop)


@base.columns.register
def _(T: LowRank, which: np.ndarray) -> np.ndarray:
    which = np.asarray(which)
    block = T.left @ T.right[which].T
    part = T.band[:, which].tocoo()
    block[part.row, part.col] = part.data
    return block


@base.entries_at.register
def _(T: LowRank, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    row, column = np.asarray(row), np.asarray(column)
    values = np.empty(row.size)
    step = max(1, base.BLOCK_ENTRIES // max(T.rank, 1))  # (step, F) factor rows at a time
    for start in range(0, row.size, step):
        part = slice(start, start + step)
        values[part] = np.einsum("kf,kf->k", T.left[row[part]], T.right[column[part]])
    stored = sp.csr_array((np.ones(T.band.nnz), T.band.indices, T.band.indptr), shape=T.shape)
    inside = np.asarray(stored[row, column]).ravel() != 0
    values[inside] = np.asarray(T.band[row[inside], column[inside]]).ravel()
    return values


@base.toarray.register
def _(T: LowRank) -> np.ndarray:
    return T.toarray()


@base.stored_entries.register
def _(T: LowRank) -> int:
    return int(T.left.size + T.right.size + T.band.nnz)


def _supports(factor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct supports of the rows of ``factor`` (as 0/1 rows) and how many rows
    have each."""
    return np.unique(factor > 0, axis=0, return_counts=True)


@base.count_nonzero.register
def _(T: LowRank) -> int:
    # A product entry is non-zero where the two rows' supports meet: count by pairs of
    # distinct supports (one pair when the factors are positive, as a feature map's are).
    left, left_count = _supports(T.left)
    right, right_count = _supports(T.right)
    meets = (left.astype(np.float64) @ right.T.astype(np.float64)) > 0
    product = int(left_count @ meets @ right_count)
    band_product = int(np.count_nonzero(T.product_at_band()))
    return product - band_product + int(np.count_nonzero(T.band.data))


@base.step_work.register
def _(T: LowRank, support: np.ndarray) -> int:
    band = int(np.diff(T.band.indptr)[support].sum())
    return int(np.count_nonzero(support)) * T.rank + T.right.size + band


@base.layout.register
def _(T: LowRank) -> forward.LowRank:
    correction = sp.csr_array(
        (T.band.data - T.product_at_band(), T.band.indices, T.band.indptr), shape=T.shape
    )
    band = forward.CsrRows(T.band.indptr, T.band.indices, T.band.data)
    return forward.LowRank(csr_layout(correction), T.left, T.right, band)


@base.backward_product.register
def _(T: LowRank, messages) -> np.ndarray:
    messages = base.as_vectors(messages, T.shape[1], "messages")
    return base.run_backward(base.layout(T), messages, T.shape[0])


@base.check_max_product.register
def _(T: LowRank) -> None:
    n, m = T.shape
    if n * m > MAX_DENSE:
        raise ValueError(
            f"the max-product step of a {n} x {m} low-rank matrix generates all of its "
            f"{n * m:,} entries (at most {MAX_DENSE:,}); decode a sparse approximation "
            "(pipeline.methods.approximate: topp, topk) or take smoothing's most probable "
            "state at each step"
        )


@base.max_product.register
def _(T: LowRank, weights) -> base.MaxProduct:
    base.check_max_product(T)
    weights = base.as_vectors(weights, T.shape[0], "weights")
    return base.run_max_product(base.layout(T), weights, T.shape[1])


@base.expected_counts.register
def _(T: LowRank, before: np.ndarray, after: np.ndarray) -> LowRank:
    # Off the band the counts are sum_f sum_t (left[i, f] before[t, i]) (right[j, f]
    # after[t, j]): rank F T'.
    n, m = T.shape
    left = (T.left[:, :, None] * before.T[:, None, :]).reshape(n, -1)
    right = (T.right[:, :, None] * after.T[:, None, :]).reshape(m, -1)
    band = sp.csr_array(
        (T.band.data * entry_sums(T.band, before, after), T.band.indices, T.band.indptr),
        shape=T.shape,
    )
    return LowRank(left, right, band)


@base.column_sampler.register
def _(T: LowRank) -> base.Sampler:
    # Row i is its band's entries plus the product off the band: draw which by their masses;
    # off the band, draw a feature f by left[i, f] sum_j right[j, f], then j by right[:, f],
    # and draw again while j lands on the band (exact: the product restricted off the band).
    n, m = T.shape
    band = RowDraws(T.band)
    features = np.cumsum(T.left * T.right.sum(axis=0), axis=1)  # (n, F)
    at_band = np.bincount(entry_rows(T.band.indptr), T.product_at_band(), minlength=n)
    off_band = np.maximum(features[:, -1] - at_band, 0.0)
    along = np.ascontiguousarray(np.cumsum(T.right, axis=0).T).reshape(-1)  # (F m,)
    starts = np.arange(0, along.size + 1, m)

    def product(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        targets = rng.random(rows.size) * features[rows, -1]
        f = np.minimum((features[rows] <= targets[:, None]).sum(axis=1), T.rank - 1)
        positions = np.empty(rows.size, np.int64)
        totals = along[starts[f + 1] - 1]
        draw.search(starts, along, f, rng.random(rows.size) * totals, positions)
        return positions - starts[f]

    def sample(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        targets = rng.random(rows.size) * (band.totals[rows] + off_band[rows])
        in_band = targets < band.totals[rows]
        out = np.empty(rows.size, np.int64)
        out[in_band] = band(rows[in_band], targets[in_band])
        pending = np.flatnonzero(~in_band)
        for _ in range(base.REJECTIONS):
            if not pending.size:
                return out
            columns = product(rows[pending], rng)
            landed = np.empty(pending.size, np.bool_)
            draw.stored(T.band.indptr, T.band.indices, rows[pending], columns, landed)
            out[pending[~landed]] = columns[~landed]
            pending = pending[landed]
        for row in np.unique(rows[pending]):  # the band holds most of their product
            which = pending[rows[pending] == row]
            values = T.rows(row, row + 1)[0]
            values[T.band.indices[T.band.indptr[row] : T.band.indptr[row + 1]]] = 0.0
            cumulative = np.cumsum(values)
            targets = rng.random(which.size) * cumulative[-1]
            out[which] = np.minimum(np.searchsorted(cumulative, targets, side="right"), m - 1)
        return out

    return sample


@base.least_overlap.register
def _(T: LowRank, which: np.ndarray) -> float:
    n, m = T.shape
    if n * m > MAX_DENSE:
        raise ValueError(
            f"the exact minimal mixing rate of a {n} x {m} low-rank matrix needs it dense "
            f"(at most {MAX_DENSE:,} entries); use its Doeblin lower bound instead"
        )
    return float(gamma.pairs_dense(T.toarray(), which, np.inf))


def factor_doeblin_bound(T: LowRank) -> float:
    """A lower bound on ``sum_j min_i T[i, j]`` in O((n + m) F + nnz(band)):
    ``sum_j min(min_{i in band(j)} band[i, j], sum_f (min_i left[i, f]) right[j, f])``.

    It holds because the factors are non-negative: every product entry of column
    j is at least ``sum_f (min_i left[i, f]) right[j, f]``. Equal to the Doeblin
    bound for rank one without a band.
    """
    lowest = T.right @ T.left.min(axis=0)
    by_column = T.band.tocsc()
    stored = np.flatnonzero(np.diff(by_column.indptr))
    if stored.size:
        band_lowest = np.minimum.reduceat(by_column.data, by_column.indptr[stored])
        lowest[stored] = np.minimum(lowest[stored], band_lowest)
    return float(lowest.sum())


@base.shared_mass.register
def _(T: LowRank) -> float:
    """Exact from row blocks up to ``MAX_DENSE`` entries; above, ``factor_doeblin_bound``."""
    n, m = T.shape
    if n * m > MAX_DENSE:
        return factor_doeblin_bound(T)
    step = max(1, base.BLOCK_ENTRIES // max(m, 1))
    lowest = np.full(m, np.inf)
    for start in range(0, n, step):
        np.minimum(lowest, T.rows(start, min(start + step, n)).min(axis=0), out=lowest)
    return float(lowest.sum())


@base.row_blocks.register
def _(T: LowRank, direct: np.ndarray | None = None) -> list:
    n, m = T.shape
    if float(n) * m > base.MAX_GENERATED:
        raise ValueError(
            f"selecting rows of a {n} x {m} low-rank matrix generates every entry "
            f"(at most {base.MAX_GENERATED:.0e}); choose fewer states"
        )
    step = max(1, base.BLOCK_ENTRIES // max(m, 1))
    return [
        (lambda start=start: base.DenseRows(T.rows(start, min(start + step, n)), generated=True))
        for start in range(0, n, step)
    ]
