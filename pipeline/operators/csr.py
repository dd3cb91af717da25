"""Sparse matrices: ``scipy.sparse.csr_array`` (n, m), float64, sorted indices, no duplicates.

An exact step scatters the stored entries of the rows of non-zero states,
O(nnz); with short rows and a mostly non-zero belief it runs one flat loop
over all entries, which costs less than the loop over rows. Columns that are
mostly full are stepped as a dense panel by BLAS instead (``PANEL_DENSITY``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.kernels import backward, draw, forward, gamma
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


COMPRESSED = {
    "csr": ("row", "column"),
    "csc": ("column", "row"),
    "bsr": ("block row", "block column"),
}
"""The compressed sparse formats, and what their ``indptr`` and ``indices`` run over."""


def _check_integers(values: np.ndarray, name: str) -> None:
    if values.ndim != 1 or values.dtype.kind not in "iu":
        raise ValueError(
            f"{name} is {values.dtype} of shape {values.shape}; allowed: a 1-D integer array"
        )


def _check_range(values: np.ndarray, name: str, stop: int, what: str) -> None:
    """Every entry of ``values`` in ``0..stop - 1``, else ``ValueError`` naming the first."""
    bad = (values < 0) | (values >= stop)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name}[{k}] = {values[k]} is out of range; allowed: a {what} in 0..{stop - 1}"
        )


def _check_compressed(matrix, name: str) -> None:
    """``indptr`` non-decreasing from 0 to the number of stored entries, one pointer per
    row (column for CSC, block row for BSR) and one more, every index within the shape."""
    major, minor = matrix.shape if matrix.format != "csc" else matrix.shape[::-1]
    if matrix.format == "bsr":
        rows, cols = matrix.blocksize
        major, minor = major // rows, minor // cols
        if matrix.data.ndim != 3 or matrix.data.shape[1:] != (rows, cols):
            raise ValueError(
                f"{name} data has shape {matrix.data.shape}; allowed: (blocks, {rows}, {cols})"
            )
    elif matrix.data.ndim != 1:
        raise ValueError(f"{name} data has shape {matrix.data.shape}; allowed: 1-D")
    indptr, indices = matrix.indptr, matrix.indices
    _check_integers(indptr, f"{name} indptr")
    _check_integers(indices, f"{name} indices")
    over, within = COMPRESSED[matrix.format]
    if indptr.size != major + 1:
        raise ValueError(
            f"{name} indptr has {indptr.size} entries; a {matrix.format.upper()} matrix of shape "
            f"{matrix.shape} has {major + 1} (one per {over}, and one more)"
        )
    stored = indices.size
    if matrix.data.shape[0] != stored:
        raise ValueError(
            f"{name} stores {stored} indices and {matrix.data.shape[0]} values; allowed: as many"
        )
    if indptr[0] != 0:
        raise ValueError(f"{name} indptr starts at {indptr[0]}; allowed: 0")
    down = np.flatnonzero(np.diff(indptr) < 0)
    if down.size:
        k = int(down[0])
        raise ValueError(
            f"{name} indptr decreases from {indptr[k]} to {indptr[k + 1]} at {k + 1}; "
            "allowed: a non-decreasing sequence"
        )
    if indptr[-1] > stored:
        raise ValueError(
            f"{name} indptr ends at {indptr[-1]}; allowed: at most the {stored} stored entries"
        )
    _check_range(indices[: indptr[-1]], f"{name} indices", minor, within)


def check_structure(matrix, name: str = "matrix") -> None:
    """Raise ``ValueError`` naming ``name`` and its first malformed part unless the
    ``scipy.sparse`` matrix ``matrix`` is well formed: real entries, index arrays of
    integers, ``indptr`` non-decreasing from 0 with one pointer per row (CSR), column (CSC)
    or block row (BSR) and one more, every index and coordinate within the shape. O(nnz).

    The gate before anything reads a sparse matrix's entries: scipy's constructors check
    only the index arrays' lengths (``check_format(full_check=False)``) and converting a
    malformed matrix reads out of bounds, as the compiled kernels would, which run without
    bounds checks (``pipeline.kernels``).
    """
    base.check_real(matrix.data, name)
    if matrix.format in COMPRESSED:
        _check_compressed(matrix, name)
    elif matrix.format == "coo":
        for axis, coords in enumerate(matrix.coords):
            _check_integers(coords, f"{name} coords[{axis}]")
            _check_range(
                coords, f"{name} coords[{axis}]", matrix.shape[axis], ("row", "column")[axis]
            )
    elif matrix.format == "dia":
        _check_integers(matrix.offsets, f"{name} offsets")


def canonical(matrix, name: str = "matrix") -> sp.csr_array:
    """``matrix`` (any ``scipy.sparse`` format) as a float64 CSR array with sorted indices and
    no duplicates, once ``check_structure`` passed it."""
    check_structure(matrix, name)
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
    return canonical(matrix, name)


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


def rows_layout(S: sp.csr_array) -> forward.CsrRows:
    """A canonical CSR array's stored rows as they are, the layout of the steps that read a
    row at a time: the backward gather and the max-product step."""
    return forward.CsrRows(S.indptr, S.indices, S.data)


def entry_sums(S: sp.csr_array, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``sum_t before[t, i] after[t, j]`` at each stored entry ``(i, j)`` of ``S``, (nnz,)."""
    out = np.empty(S.indices.size)
    backward.entry_sums(
        S.indptr,
        S.indices,
        np.ascontiguousarray(before.T, dtype=np.float64),
        np.ascontiguousarray(after.T, dtype=np.float64),
        out,
    )
    return out


@base.backward_product.register
def _(T: sp.csr_array, messages) -> np.ndarray:
    messages = base.as_vectors(messages, T.shape[1], "messages")
    return base.run_backward(rows_layout(T), messages, T.shape[0])


@base.max_product.register
def _(T: sp.csr_array, weights) -> base.MaxProduct:
    weights = base.as_vectors(weights, T.shape[0], "weights")
    return base.run_max_product(rows_layout(T), weights, T.shape[1])


@base.expected_counts.register
def _(T: sp.csr_array, before: np.ndarray, after: np.ndarray) -> sp.csr_array:
    values = T.data * entry_sums(T, before, after)
    return sp.csr_array((values, T.indices.copy(), T.indptr.copy()), shape=T.shape)


class RowDraws:
    """Inverse-CDF draws from the stored entries of a canonical CSR array's rows."""

    def __init__(self, S: sp.csr_array) -> None:
        self.S = S
        self.cumulative = draw.row_cumsums(S.indptr, S.data)
        self.totals = np.zeros(S.shape[0])
        filled = np.diff(S.indptr) > 0
        self.totals[filled] = self.cumulative[S.indptr[1:][filled] - 1]

    def __call__(self, rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The column of row ``rows[d]`` at cumulative mass ``targets[d]``, for each d."""
        positions = np.empty(rows.size, np.int64)
        draw.search(self.S.indptr, self.cumulative, rows, targets, positions)
        return self.S.indices[positions].astype(np.int64)


@base.column_sampler.register
def _(T: sp.csr_array) -> base.Sampler:
    draws = RowDraws(T)

    def sample(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return draws(rows, rng.random(rows.size) * draws.totals[rows])

    return sample


@base.least_overlap.register
def _(T: sp.csr_array, which: np.ndarray) -> float:
    return float(gamma.pairs_csr(T.indptr, T.indices, T.data, T.shape[1], which, np.inf))


@base.shared_mass.register
def _(T: sp.csr_array) -> float:
    return float(np.asarray(T.min(axis=0).toarray()).sum())


@base.row_blocks.register
def _(T: sp.csr_array, direct: np.ndarray | None = None) -> list:
    return [lambda: base.SparseRows(T.indptr, T.indices, T.data)]
