"""Matrices that are a sparse matrix plus a rank-one term, stored as such.

Several exact models have every entry non-zero yet cost only O(nnz + n) to
store and to multiply: the Bell HMM is five peaks per row on a uniform
background, smoothed bigrams are sparse counts plus a smoothing term. As
``S + outer(u, v)`` they never exist as dense matrices, so their exact
inference steps cost O(nnz + n) instead of O(n^2) and models of 100,000s of
states fit in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def entry_rows(indptr: np.ndarray, dtype=np.intp) -> np.ndarray:
    """The row of each stored entry of a CSR matrix with row pointers ``indptr``, shape (nnz,)."""
    return np.repeat(np.arange(indptr.size - 1, dtype=dtype), np.diff(indptr))


@dataclass(frozen=True, eq=False)
class SparsePlusRankOne:
    """The matrix ``sparse + outer(u, v)``, shape (n, m).

    Parameters
    ----------
    sparse : csr_array, shape (n, m)
        The sparse part ``S`` (sorted indices, no duplicates).
    u : ndarray, shape (n,)
        Row factor of the rank-one part.
    v : ndarray, shape (m,)
        Column factor of the rank-one part; ``v`` constant makes every row a
        set of peaks on a flat background ``u[i] * v[0]``.

    >>> import numpy as np, scipy.sparse as sp
    >>> M = SparsePlusRankOne(sp.csr_array(np.eye(2) * 0.5), np.full(2, 0.25), np.ones(2))
    >>> M.rows(0, 2)
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """

    sparse: sp.csr_array
    u: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        sparse = sp.csr_array(self.sparse, dtype=np.float64)
        sparse.sum_duplicates()
        sparse.sort_indices()
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

    def columns(self, columns) -> np.ndarray:
        """Columns ``columns`` as a dense array, shape (n, len(columns))."""
        columns = np.asarray(columns)
        return self.sparse[:, columns].toarray() + np.outer(self.u, self.v[columns])

    def at(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The entries at positions ``(rows[k], columns[k])``, shape (k,)."""
        return np.asarray(self.sparse[rows, columns]).ravel() + self.u[rows] * self.v[columns]

    def pattern(self) -> sp.csr_array:
        """The entries ``S + u v`` at the stored positions of ``S``, as a CSR array."""
        rows = entry_rows(self.sparse.indptr)
        values = self.sparse.data + self.u[rows] * self.v[self.sparse.indices]
        return sp.csr_array((values, self.sparse.indices, self.sparse.indptr), shape=self.shape)

    def row_sums(self) -> np.ndarray:
        return np.asarray(self.sparse.sum(axis=1)).ravel() + self.u * self.v.sum()
