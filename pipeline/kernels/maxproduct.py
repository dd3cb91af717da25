"""The max-product step of every matrix layout, and the Viterbi recursion.

The max-product step is the forward step with the sum over predecessors replaced by a
maximum: ``out[j] = max_i weights[i] * T[i, j]``, and ``states[j]`` the least ``i`` that
attains it (on ties, the lowest state index; 0 for a column whose products are all zero,
as ``argmax`` gives). It reads the forward layouts (``pipeline.kernels.forward``):

- ``Dense``: every row, O(n m);
- ``CsrRows``, ``CsrEntries``: the stored entries of the rows of non-zero states, O(nnz)
  (an entry not stored is a product of zero, which never wins);
- ``CsrPanel``: its sparse rest so, and each panel column by a pass over its rows;
- ``Structured`` (``S + outer(u, v)``): the stored entries with their rank-one part, then,
  for each column, the best row that does not store it, whose product is
  ``weights[i] u[i] v[j]``: the rows in order of ``weights * u`` (descending, lower index
  first) are walked only until every column has found one, so the step costs
  O(nnz + n + m) when few rows share a column;
- ``LowRank``: no sub-quadratic exact maximum exists; its rows are generated in blocks of
  about ``BLOCK_ENTRIES`` entries (the band's entries set in place) and scanned as dense
  rows, O(n m F). ``pipeline.operators`` refuses this above a size it documents.

``max_advance`` is resolved per layout class when the recursion compiles, as
``pipeline.kernels.forward.advance`` is. ``viterbi`` runs the scaled max-product recursion
over a segment of steps, writing back-pointers into an integer array of any width, so a
horizon can be decoded segment by segment from checkpoints.

Every step and the recursion live in this one module (importing only the layout classes
from ``forward``), for numba's cache, as ``pipeline.kernels.forward`` explains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import types
from numba.extending import overload

from pipeline.kernels.forward import CsrEntries, CsrPanel, CsrRows, Dense, LowRank, Structured

if TYPE_CHECKING:
    from pipeline.kernels import JitOptions

JIT: JitOptions = {"cache": True, "nogil": True}

BLOCK_ENTRIES = 2**20
"""A ``LowRank`` max-product step generates its rows in blocks of about this many entries
(8 MiB of float64)."""

WALKED_ROWS = 16
"""A ``Structured`` step finds the best rows off each column's pattern by taking rows in
order of ``weights * u`` one scan at a time; past this many it sorts them all once."""


def _is(layout, cls) -> bool:
    """Whether the numba type ``layout`` is the named tuple class ``cls``."""
    return (
        isinstance(layout, (types.NamedTuple, types.NamedUniTuple)) and layout.instance_class is cls
    )


def max_advance(layout, weights, out, states):
    """``out[j] = max_i weights[i] T[i, j]`` and ``states[j]`` the least maximising ``i``
    (compiled code only)."""
    raise NotImplementedError("max_advance runs inside compiled code")


# --- the steps -----------------------------------------------------------------------------


@numba.njit(**JIT)
def _max_rows_dense(T, weights, offset, out, states):
    """Fold rows ``offset .. offset + len(T)`` of a dense matrix into ``out``/``states``,
    in order, a row replacing the best only where its product is strictly larger.

    Four rows at a time: each column's best of the four (a pairwise tournament in which the
    lower row wins ties) is folded in once, so ``out`` and ``states`` are read and written
    once per four rows; a block of four zero weights is skipped.
    """
    rows, m = T.shape[0], out.size
    r = 0
    while r + 3 < rows:
        w0, w1 = weights[offset + r], weights[offset + r + 1]
        w2, w3 = weights[offset + r + 2], weights[offset + r + 3]
        if w0 == 0.0 and w1 == 0.0 and w2 == 0.0 and w3 == 0.0:
            r += 4
            continue
        a, b, c, d = T[r], T[r + 1], T[r + 2], T[r + 3]
        for j in range(m):
            x, y, z, q = w0 * a[j], w1 * b[j], w2 * c[j], w3 * d[j]
            best, arg = x, offset + r
            if y > x:
                best, arg = y, offset + r + 1
            other, second = z, offset + r + 2
            if q > z:
                other, second = q, offset + r + 3
            if other > best:
                best, arg = other, second
            if best > out[j]:
                out[j] = best
                states[j] = arg
        r += 4
    for last in range(r, rows):
        weight = weights[offset + last]
        if weight == 0.0:  # products of zero never win
            continue
        row = T[last]
        for j in range(m):
            value = weight * row[j]
            if value > out[j]:
                out[j] = value
                states[j] = offset + last


@numba.njit(**JIT)
def _max_rows_csr(indptr, indices, data, weights, out, states):
    """Fold the stored entries of CSR rows, in order, into ``out``/``states``."""
    for i in range(weights.size):
        weight = weights[i]
        if weight == 0.0:
            continue
        for k in range(indptr[i], indptr[i + 1]):
            j, value = np.uintp(indices[k]), weight * data[k]
            if value > out[j]:
                out[j] = value
                states[j] = i


@numba.njit(**JIT)
def _max_panel(columns, panel, weights, out, states):
    """The panel columns of a ``CsrPanel`` (each held for every row): their maxima."""
    for c in range(columns.size):
        column, best, arg = panel[c], 0.0, 0
        for i in range(weights.size):
            value = weights[i] * column[i]
            if value > best:
                best, arg = value, i
        out[np.uintp(columns[c])] = best
        states[np.uintp(columns[c])] = arg


@numba.njit(**JIT)
def _stores(indptr, indices, i, j):
    """Whether row ``i`` of a CSR matrix with sorted column indices stores column ``j``."""
    low, high = indptr[i], indptr[i + 1]
    while low < high:
        middle = (low + high) // 2
        if indices[middle] < j:
            low = middle + 1
        else:
            high = middle
    return low < indptr[i + 1] and indices[low] == j


@numba.njit(**JIT)
def _next_row(keys, taken):
    """The row with the largest key not yet taken (the lowest index among equal keys), or
    -1 when every row is taken; marks it taken."""
    best, arg = -1.0, -1
    for i in range(keys.size):
        if not taken[i] and keys[i] > best:
            best, arg = keys[i], i
    if arg >= 0:
        taken[arg] = True
    return arg


@numba.njit(**JIT)
def _max_structured(indptr, indices, data, panel_columns, panel, u, v, weights, out, states):
    """The max-product step of ``S + outer(u, v)``: ``S`` as CSR arrays of the columns
    outside ``panel_columns`` (which ``panel`` (h, n) holds for every row, zeros included).

    Each column's candidates are its stored entries (with their rank-one part) and the best
    row that does not store it, whose product is ``weights[i] * (u[i] * v[j])``: the first
    such row in order of ``weights * u``, descending, lower index first.
    """
    n, m = weights.size, out.size
    out[:] = -1.0  # below every product: the first stored candidate of a column registers
    states[:] = 0
    for i in range(n):
        weight, ui = weights[i], u[i]
        for k in range(indptr[i], indptr[i + 1]):
            j: int | np.unsignedinteger = np.uintp(indices[k])
            value = weight * (data[k] + ui * v[j])
            if value > out[j]:
                out[j] = value
                states[j] = i
    keys = weights * u
    taken = np.zeros(n, np.bool_)
    first = _next_row(keys, taken)
    off = np.full(m, first, np.int64)  # the best row off each column's pattern, or -1
    for c in range(panel_columns.size):
        j = np.uintp(panel_columns[c])
        off[j] = -1
        column, best, arg = panel[c], -1.0, 0
        for i in range(n):
            value = weights[i] * (column[i] + u[i] * v[j])
            if value > best:
                best, arg = value, i
        out[j], states[j] = best, arg
    open_ = indices[indptr[first] : indptr[first + 1]].astype(np.int64)  # the first row's
    walked, order = 1, np.empty(0, np.int64)
    while open_.size:
        if walked < WALKED_ROWS:
            row = _next_row(keys, taken)
        else:
            if order.size == 0:
                order = np.argsort(-keys, kind="mergesort")
            row = order[walked] if walked < n else -1
        walked += 1
        if row < 0:  # every row stores these columns
            for j in open_:
                off[j] = -1
            break
        kept = 0
        for j in open_:
            if _stores(indptr, indices, row, j):
                open_[kept] = j
                kept += 1
            else:
                off[j] = row
        open_ = open_[:kept]
    for j in range(m):
        i = off[j]
        if i >= 0:
            value = weights[i] * (u[i] * v[j])
            if value > out[j] or (value == out[j] and i < states[j]):
                out[j], states[j] = value, i
        if out[j] <= 0.0:  # every product is zero: the lowest state, as argmax gives
            out[j], states[j] = 0.0, 0


@numba.njit(**JIT)
def _max_low_rank(left, right, band_indptr, band_indices, band_data, weights, out, states):
    """The max-product step of ``left @ right.T`` with the band's entries in place: rows
    generated ``BLOCK_ENTRIES`` entries at a time and folded in as dense rows."""
    n, m = left.shape[0], right.shape[0]
    size = max(1, BLOCK_ENTRIES // max(m, 1))
    block = np.empty((min(size, n), m))
    out[:] = 0.0
    states[:] = 0
    for start in range(0, n, size):
        stop = min(n, start + size)
        rows = block[: stop - start]
        np.dot(left[start:stop], right.T, rows)
        for i in range(start, stop):
            for k in range(band_indptr[i], band_indptr[i + 1]):
                rows[i - start, np.uintp(band_indices[k])] = band_data[k]
        _max_rows_dense(rows, weights, start, out, states)


@overload(max_advance, jit_options=JIT)
def _max_advance_dense(layout, weights, out, states):
    if _is(layout, Dense):

        def step(layout, weights, out, states):
            out[:] = 0.0
            states[:] = 0
            _max_rows_dense(layout.T, weights, 0, out, states)

        return step
    return None


@overload(max_advance, jit_options=JIT)
def _max_advance_csr(layout, weights, out, states):
    if _is(layout, CsrRows) or _is(layout, CsrEntries):

        def step(layout, weights, out, states):
            out[:] = 0.0
            states[:] = 0
            _max_rows_csr(layout.indptr, layout.indices, layout.data, weights, out, states)

        return step
    return None


@overload(max_advance, jit_options=JIT)
def _max_advance_csr_panel(layout, weights, out, states):
    if _is(layout, CsrPanel):

        def step(layout, weights, out, states):
            max_advance(layout.rest, weights, out, states)
            _max_panel(layout.columns, layout.panel, weights, out, states)

        return step
    return None


@overload(max_advance, jit_options=JIT)
def _max_advance_structured(layout, weights, out, states):
    if _is(layout, Structured):
        sparse = layout.types[0]
        if _is(sparse, CsrPanel):

            def step(layout, weights, out, states):
                rest = layout.sparse.rest
                _max_structured(
                    rest.indptr,
                    rest.indices,
                    rest.data,
                    layout.sparse.columns,
                    layout.sparse.panel,
                    layout.u,
                    layout.v,
                    weights,
                    out,
                    states,
                )

            return step

        def plain(layout, weights, out, states):
            sparse = layout.sparse
            _max_structured(
                sparse.indptr,
                sparse.indices,
                sparse.data,
                sparse.indices[:0],
                np.empty((0, weights.size)),
                layout.u,
                layout.v,
                weights,
                out,
                states,
            )

        return plain
    return None


@overload(max_advance, jit_options=JIT)
def _max_advance_low_rank(layout, weights, out, states):
    if _is(layout, LowRank):

        def step(layout, weights, out, states):
            band = layout.band
            _max_low_rank(
                layout.left,
                layout.right,
                band.indptr,
                band.indices,
                band.data,
                weights,
                out,
                states,
            )

        return step
    return None


@numba.njit(**JIT)
def step(layout, weights, out, states):
    """``out[j] = max_i weights[i] T[i, j]``, ``states[j]`` the least maximising ``i``: one
    max-product step, as the recursion takes it, callable from Python."""
    max_advance(layout, weights, out, states)


# --- the recursion -------------------------------------------------------------------------


@numba.njit(**JIT)
def viterbi(layout, initial, likelihoods, rows, start, delta, back, zero, total):
    """The scaled max-product recursion over one segment of T' steps.

    Parameters
    ----------
    layout : the transition matrix as a layout of ``pipeline.kernels.forward``.
    initial : (n,) ``P(S_0)``, read when ``start``.
    likelihoods : (k, n) ``P(o | S)`` (each row scaled by a constant) of each distinct row.
    rows : (T',) int, the row of ``likelihoods`` observed at each step, or -1.
    start : bool, the segment starts the horizon (its step 0 is ``initial`` conditioned).
    delta : (n,) in and out. In (unless ``start``): the step before the segment's
        ``max over paths P(S_t = j, path, o_0..o_t)`` divided by its largest entry.
        Out: the same of the segment's last step.
    back : (T', n) int output of any width: ``back[t, j]`` the state at the step before
        on the best path into ``j`` at step ``t`` (``back[0]`` untouched when ``start``).
    zero : (T',) bool output, True where no path could emit the observation: the step is
        taken as unobserved.
    total : float, the sum of the steps before (0.0 for a new sequence).

    Returns
    -------
    float
        ``total`` plus the log of each step's largest entry before division, step by step
        (a horizon decoded whole or in segments sums in the same order): with the rows'
        scales, the best path's log probability.
    """
    n = delta.size
    current, states = np.empty(n), np.empty(n, np.int64)
    for t in range(rows.size):
        if t == 0 and start:
            current[:] = initial
        else:
            max_advance(layout, delta, current, states)
            for j in range(n):
                back[t, j] = states[j]
        if rows[t] >= 0:
            likelihood = likelihoods[rows[t]]
            top = 0.0
            for j in range(n):
                top = max(top, current[j] * likelihood[j])
            if top > 0.0:
                for j in range(n):
                    current[j] *= likelihood[j]
            else:
                zero[t] = True
        top = 0.0
        for j in range(n):
            top = max(top, current[j])
        for j in range(n):
            delta[j] = current[j] / top
        total += np.log(top)
    return total


@numba.njit(**JIT)
def backtrack(back, state, path):
    """Fill ``path`` (T',) backwards from ``state`` at the segment's last step, following
    ``back`` (T', n); returns ``back[0, path[0]]``, the state at the step before the
    segment (meaningless for the segment that starts the horizon)."""
    for t in range(back.shape[0] - 1, -1, -1):
        path[t] = state
        state = back[t, state]
    return state
