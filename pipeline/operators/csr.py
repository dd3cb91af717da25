"""Sparse matrices: ``scipy.sparse.csr_array`` (n, m), float64, sorted indices, no duplicates.

An exact step scatters the stored entries of the rows of non-zero states,
O(nnz); with short rows and a mostly non-zero belief it runs one flat loop
over all entries, which costs less than the loop over rows. Columns that are
mostly full are stepped as a dense panel by BLAS instead (``PANEL_DENSITY``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.kernels import forward, gamma
from pipeline.operators import base

SHORT_ROWS = 64
"""A CSR matrix with fewer entries per row on average steps from mostly non-zero
beliefs in one flat loop over its entries instead of row by row
(``pipeline.kernels.forward.CsrEntries``): measured 1.1 against 1.3 to
2 ns per entry at 5 entries per row, even at 64, slower (1.05 against 1.0) at
thousands."""


def entry_rows(indptr: np.ndarray, dtype=np.intp) -> np.ndarray:
    """The row of each stored entry of a CSR matrix with row pointers ``indptr``, shape (nnz,)."""
    return np.repeat(np.arange(indptr.size - 1, dtype=dtype), np.diff(indptr))


def canonical(matrix) -> sp.csr_array:
    """``matrix`` as a float64 CSR array with sorted indices and no duplicates."""
    csr = sp.csr_array(matrix, dtype=np.float64)
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    csr.sort_indices()
    return csr


PANEL_DENSITY = 2 / 3
"""A column of a CSR matrix with at least this share of its entries stored is as small kept
dense (8 bytes an entry, zeros included) as in CSR (12): such columns go into a dense panel
that BLAS steps (``pipeline.kernels.forward.CsrPanel``) when they hold at least
``PANEL_ENTRIES`` entries."""
PANEL_ENTRIES = 50_000
"""The fewest stored entries in mostly full columns for which a CSR layout keeps them as a
dense panel: chosen, not tuned (below it a step takes microseconds either way). What the
panel gains against the whole matrix scattered is measured by ``python benchmarks/bench.py
scipy`` (``docs/benchmarks.md``, part 1e)."""


def _rows_layout(S: sp.csr_array) -> forward.CsrRows | forward.CsrEntries:
    """Over all entries at once for short rows on average, else row by row."""
    if S.indices.size < SHORT_ROWS * S.shape[0]:
        return forward.CsrEntries(
            S.indptr, S.indices, S.data, entry_rows(S.indptr, S.indices.dtype)
        )
    return forward.CsrRows(S.indptr, S.indices, S.data)


def csr_layout(S: sp.csr_array) -> forward.CsrRows | forward.CsrEntries | forward.CsrPanel:
    """The forward layout of a canonical CSR array: its mostly full columns as a dense panel
    when they hold enough entries (``PANEL_DENSITY``, ``PANEL_ENTRIES``), the other entries
    (or all) scattered row by row, or over all entries at once for short rows."""
    n = S.shape[0]
    counts = np.bincount(S.indices, minlength=S.shape[1])
    full = counts >= PANEL_DENSITY * n
    if counts[full].sum() < PANEL_ENTRIES:
        return _rows_layout(S)
    columns = np.flatnonzero(full)
    where = np.full(S.shape[1], -1, np.intp)
    where[columns] = np.arange(columns.size)
    panel = np.zeros((columns.size, n))
    indptr, indices, data = forward.split_columns(S.indptr, S.indices, S.data, where, panel)
    rest = sp.csr_array((data, indices, indptr), shape=S.shape)
    return forward.CsrPanel(_rows_layout(rest), columns.astype(S.indices.dtype), panel)


@base.as_operator.register(sp.sparray)
@base.as_operator.register(sp.spmatrix)
def _(matrix, name: str = "matrix") -> sp.csr_array:
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {matrix.shape}")
    return canonical(matrix)


@base.check_entries.register
def _(T: sp.csr_array, name: str, *, vector: bool = False) -> None:
    bad = ~np.isfinite(T.data) | (T.data < 0)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        row = int(np.searchsorted(T.indptr, position, side="right") - 1)
        raise base.bad_entry(name, row, int(T.indices[position]), T.data[position], vector=vector)


@base.row_sums.register
def _(T: sp.csr_array) -> np.ndarray:
    return np.asarray(T.sum(axis=1)).ravel()


@base.rows.register
def _(T: sp.csr_array, start: int, stop: int) -> np.ndarray:
    return T[start:stop].toarray()


@base.columns.register
def _(T: sp.csr_array, which: np.ndarray) -> np.ndarray:
    return T[:, which].toarray()


@base.entries_at.register
def _(T: sp.csr_array, row: np.ndarray, column: np.ndarray) -> np.ndarray:
    return np.asarray(T[row, column]).ravel()


@base.toarray.register
def _(T: sp.csr_array) -> np.ndarray:
    return T.toarray()


@base.stored_entries.register
def _(T: sp.csr_array) -> int:
    return int(T.nnz)


@base.count_nonzero.register
def _(T: sp.csr_array) -> int:
    return int(T.count_nonzero())


@base.step_work.register
def _(T: sp.csr_array, support: np.ndarray) -> int:
    return int(np.diff(T.indptr)[support].sum())


@base.layout.register
def _(T: sp.csr_array) -> forward.CsrRows | forward.CsrEntries | forward.CsrPanel:
    return csr_layout(T)


@base.batch_products.register
def _(T: sp.csr_array) -> base.Products:
    transposed = T.T.tocsr()
    return base.Products(lambda X: (transposed @ X.T).T, lambda Y: (T @ Y.T).T)


@base.mixing_rate_part.register
def _(T: sp.csr_array, which: np.ndarray) -> float:
    return float(gamma.pairs_csr(T.indptr, T.indices, T.data, T.shape[1], which, np.inf))


@base.doeblin_lower_bound.register
def _(T: sp.csr_array) -> float:
    return float(np.asarray(T.min(axis=0).toarray()).sum())


@base.row_blocks.register
def _(T: sp.csr_array, direct: np.ndarray | None = None) -> list:
    return [lambda: base.SparseRows(T.indptr, T.indices, T.data)]
