"""Matrices that are a sparse matrix plus a rank-one term, stored as such.

Several exact models have every entry non-zero yet cost only O(nnz + n) to
store and to multiply: the Bell HMM is five peaks per row on a uniform
background, smoothed bigrams are sparse counts plus a smoothing term. As
``S + outer(u, v)`` they never exist as dense matrices, so their exact
inference steps cost O(nnz + n) instead of O(n^2) and models of 100,000s of
states fit in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline.kernels import forward, gamma
from pipeline.operators import base
from pipeline.operators.csr import (
    RowDraws,
    canonical,
    csr_layout,
    entry_rows,
    entry_sums,
    rows_layout,
)
from pipeline.operators.lowrank import LowRank


@dataclass(frozen=True, eq=False)
class SparsePlusRankOne:
    """The matrix ``sparse + outer(u, v)``, shape (n, m).

    Parameters
    ----------
    sparse : csr_array, shape (n, m)
        The sparse part ``S`` (made canonical: sorted indices, no duplicates).
    u : ndarray, shape (n,)
        Row factor of the rank-one part.
    v : ndarray, shape (m,)
        Column factor of the rank-one part; ``v`` constant makes every row a
        set of peaks on a flat background ``u[i] * v[0]``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> M = SparsePlusRankOne(sp.csr_array(np.eye(2) * 0.5), np.full(2, 0.25), np.ones(2))
    >>> M.toarray()
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """

    sparse: sp.csr_array
    u: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        sparse = canonical(self.sparse, "sparse")
        base.check_real(self.u, "u")
        base.check_real(self.v, "v")
        u = np.ascontiguousarray(self.u, dtype=np.float64)
        v = np.ascontiguousarray(self.v, dtype=np.float64)
        if u.shape != (sparse.shape[0],) or v.shape != (sparse.shape[1],):
            raise ValueError(
                f"u {u.shape} and v {v.shape} do not fit a sparse part of shape {sparse.shape}"
            )
        object.__setattr__(self, "sparse", sparse)
        object.__setattr__(self, "u", u)
        object.__setattr__(self, "v", v)

    @property
    def shape(self) -> tuple[int, int]:
        return self.sparse.shape

    ndim = 2

    @property
    def background(self) -> np.ndarray | None:
        """Each row's value off the sparse pattern, ``u * v[0]``, when ``v`` is constant."""
        return self.u * self.v[0] if np.all(self.v == self.v[0]) else None

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a dense array, shape (stop - start, m)."""
        block = np.outer(self.u[start:stop], self.v)
        block += self.sparse[start:stop].toarray()
        return block

    def toarray(self) -> np.ndarray:
        """The whole matrix, dense, shape (n, m): for small n."""
        return self.rows(0, self.shape[0])

    def pattern(self) -> sp.csr_array:
        """The entries ``S + u v`` at the stored positions of ``S``, as a CSR array."""
        rows = entry_rows(self.sparse.indptr)
        values = self.sparse.data + self.u[rows] * self.v[self.sparse.indices]
        return sp.csr_array((values, self.sparse.indices, self.sparse.indptr), shape=self.shape)


@base.as_operator.register
def _(matrix: SparsePlusRankOne, name: str = "matrix") -> SparsePlusRankOne:
    return matrix


@base.check_entries.register
def _(T: SparsePlusRankOne, name: str, *, vector: bool = False) -> None:
    # Entries off the sparse pattern are u[i] * v[j]: both factors must be >= 0.
    base.check_factors(name, u=T.u, v=T.v)
    base.check_entries(T.pattern(), name, vector=vector)


@base.row_sums.register
def _(T: SparsePlusRankOne) -> np.ndarray:
    return np.asarray(T.sparse.sum(axis=1)).ravel() + T.u * T.v.sum()


@base.rows.register
def _(T: SparsePlusRankOne, start: int, stop: int) -> np.ndarray:
    return T.rows(start, stop)


@base.columns.register
def _(T: SparsePlusRankOne, which: np.ndarray) -> np.ndarray:
    which = np.asarray(which)
    return T.sparse[:, which].toarray() + np.outer(T.u, T.v[which])


@base.entries_at.register
def _(T: SparsePlusRankOne, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    return np.asarray(T.sparse[row, column]).ravel() + T.u[row] * T.v[column]


@base.toarray.register
def _(T: SparsePlusRankOne) -> np.ndarray:
    return T.toarray()


@base.stored_entries.register
def _(T: SparsePlusRankOne) -> int:
    return int(T.sparse.nnz + T.u.size + T.v.size)


@base.count_nonzero.register
def _(T: SparsePlusRankOne) -> int:
    # Non-zero: rank-one entries off the pattern, and pattern entries that are non-zero.
    rows = entry_rows(T.sparse.indptr)
    on_pattern = np.count_nonzero(T.u[rows] * T.v[T.sparse.indices])
    off_pattern = np.count_nonzero(T.u) * np.count_nonzero(T.v) - on_pattern
    return int(off_pattern + T.pattern().count_nonzero())


@base.step_work.register
def _(T: SparsePlusRankOne, support: np.ndarray) -> int:
    return int(np.diff(T.sparse.indptr)[support].sum()) + T.u.size + T.v.size


@base.layout.register
def _(T: SparsePlusRankOne) -> forward.Structured:
    return forward.Structured(csr_layout(T.sparse), T.u, T.v)


def _rows(T: SparsePlusRankOne) -> forward.Structured:
    """The layout of the steps that read a row at a time (backward, max-product)."""
    return forward.Structured(rows_layout(T.sparse), T.u, T.v)


@base.backward_product.register
def _(T: SparsePlusRankOne, messages) -> np.ndarray:
    messages = base.as_vectors(messages, T.shape[1], "messages")
    return base.run_backward(_rows(T), messages, T.shape[0])


@base.max_product.register
def _(T: SparsePlusRankOne, weights) -> base.MaxProduct:
    weights = base.as_vectors(weights, T.shape[0], "weights")
    return base.run_max_product(_rows(T), weights, T.shape[1])


@base.expected_counts.register
def _(T: SparsePlusRankOne, before: np.ndarray, after: np.ndarray) -> LowRank:
    # Off the pattern the counts are u[i] v[j] sum_t before[t, i] after[t, j]: rank T'.
    full = T.pattern()
    band = sp.csr_array(
        (full.data * entry_sums(full, before, after), full.indices, full.indptr), shape=T.shape
    )
    return LowRank(T.u[:, None] * before.T, T.v[:, None] * after.T, band)


@base.column_sampler.register
def _(T: SparsePlusRankOne) -> base.Sampler:
    # A row's mass is its stored entries' plus the rank-one part's, u[i] sum(v): draw which,
    # then the column from the stored entries or from v.
    draws = RowDraws(T.sparse)
    along_v = np.cumsum(T.v)
    background = T.u * along_v[-1]

    def sample(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        stored = draws.totals[rows]
        targets = rng.random(rows.size) * (stored + background[rows])
        sparse = targets < stored
        out = np.empty(rows.size, np.int64)
        out[sparse] = draws(rows[sparse], targets[sparse])
        rest = ~sparse
        within = (targets[rest] - stored[rest]) / T.u[rows[rest]]
        out[rest] = np.minimum(np.searchsorted(along_v, within, side="right"), T.v.size - 1)
        return out

    return sample


@base.least_overlap.register
def _(T: SparsePlusRankOne, which: np.ndarray) -> float:
    full = T.pattern()
    return float(
        gamma.pairs_structured(full.indptr, full.indices, full.data, T.u, T.v, which, np.inf)
    )


@base.shared_mass.register
def _(T: SparsePlusRankOne) -> float:
    S = T.sparse
    order = np.argsort(T.u, kind="stable")
    return float(gamma.doeblin_structured(S.indptr, S.indices, S.data, T.u, T.v, order))


@base.peaks.register
def _(T: SparsePlusRankOne) -> base.Peaks | None:
    background = T.background
    if background is None:
        return None
    full = T.pattern()
    rows = entry_rows(full.indptr)
    above = full.data > background[rows]
    n = T.shape[0]
    return base.Peaks(
        background,
        np.bincount(rows, weights=np.where(above, full.data, 0.0), minlength=n),
        np.bincount(rows, weights=above, minlength=n).astype(np.int64),
    )


@base.row_blocks.register
def _(T: SparsePlusRankOne, direct: np.ndarray | None = None) -> list:
    n, m = T.shape
    if direct is None:
        direct = np.zeros(n, dtype=bool)
    generated = float((~direct).sum()) * m
    if generated > base.MAX_GENERATED:
        raise ValueError(
            f"the selection would generate {generated:.3g} entries: in {int((~direct).sum())} "
            f"rows of {m} the stored peaks do not decide it; choose a setting they decide "
            "(a smaller p or k)"
        )
    full = T.pattern()
    edges = [0, *(np.flatnonzero(np.diff(direct.astype(np.int8))) + 1).tolist(), n]
    step = max(1, base.BLOCK_ENTRIES // max(m, 1))
    # each called without arguments; ``...``: the lambdas bind their loop values as defaults
    blocks: list[Callable[..., base.DenseRows | base.SparseRows]] = []
    for start, stop in itertools.pairwise(edges):
        if direct[start]:
            part = full[start:stop]
            blocks.append(lambda part=part: base.SparseRows(part.indptr, part.indices, part.data))
        else:
            blocks += [
                (
                    lambda k=k, stop=stop: base.DenseRows(
                        T.rows(k, min(k + step, stop)), generated=True
                    )
                )
                for k in range(start, stop, step)
            ]
    return blocks
