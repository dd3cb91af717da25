"""Inverse-CDF draws from the rows of sparse and factored matrices, without dense rows.

A draw from row ``r`` at a uniform target ``x`` in ``[0, row total)`` is the first stored
entry of the row whose cumulative mass exceeds ``x``: entries of zero mass are never drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

if TYPE_CHECKING:
    from pipeline.kernels import JitOptions

JIT: JitOptions = {"cache": True, "nogil": True}


@numba.njit(**JIT)
def row_cumsums(indptr, data):
    """The cumulative sums of each CSR row's stored entries, restarting at each row, (nnz,)."""
    out = np.empty(data.size)
    for i in range(indptr.size - 1):
        total = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            total += data[k]
            out[k] = total
    return out


@numba.njit(**JIT)
def search(indptr, cumulative, rows, targets, out):
    """``out[d]``: the position (into the stored entries) of the first entry of row
    ``rows[d]`` whose cumulative mass (``row_cumsums``) exceeds ``targets[d]``; where rounding
    leaves none above it, the row's last entry of non-zero mass."""
    for d in range(rows.size):
        first, last = indptr[rows[d]], indptr[rows[d] + 1] - 1
        low, high = first, last
        while low < high:
            middle = (low + high) // 2
            if cumulative[middle] > targets[d]:
                high = middle
            else:
                low = middle + 1
        if cumulative[low] <= targets[d]:
            while low > first and cumulative[low] == cumulative[low - 1]:
                low -= 1
        out[d] = low


@numba.njit(**JIT)
def stored(indptr, indices, rows, columns, out):
    """``out[d]``: whether row ``rows[d]`` of a CSR matrix with sorted indices stores
    column ``columns[d]``."""
    for d in range(rows.size):
        low, high = indptr[rows[d]], indptr[rows[d] + 1]
        while low < high:
            middle = (low + high) // 2
            if indices[middle] < columns[d]:
                low = middle + 1
            else:
                high = middle
        out[d] = low < indptr[rows[d] + 1] and indices[low] == columns[d]
