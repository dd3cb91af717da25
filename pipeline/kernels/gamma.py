"""Kernels of the minimal mixing rate's pair search and of the Doeblin bound.

Each pair search returns ``min over i in rows, k > i of sum_j min(T[i, j], T[k, j])``,
or ``best`` if that is lower. A pair is abandoned as soon as its partial sum
reaches ``best``: the sum only grows, so the pair cannot be the minimum and the
result stays exact.
"""

from __future__ import annotations

import numba
import numpy as np

CHUNK = 256
"""Columns summed between two pruning checks."""


@numba.njit(cache=True, nogil=True, fastmath=True)
def _chunk_overlap(a, b):
    s = 0.0
    for j in range(a.size):
        s += min(a[j], b[j])
    return s


@numba.njit(cache=True, nogil=True)
def pairs_dense(T, rows, best):
    """The pair search over a dense ``T`` (n, m)."""
    n = T.shape[1]
    for i in rows:
        for k in range(i + 1, T.shape[0]):
            s = 0.0
            for j in range(0, n, CHUNK):
                s += _chunk_overlap(T[i, j : j + CHUNK], T[k, j : j + CHUNK])
                if s >= best:
                    break
            if s < best:
                best = s
                if best <= 0.0:
                    return 0.0
    return best


@numba.njit(cache=True, nogil=True)
def pairs_csr(indptr, indices, data, n, rows, best):
    """The pair search over a CSR matrix with ``n`` columns: row ``i`` scattered densely."""
    dense = np.zeros(n)
    n_rows = indptr.size - 1
    for i in rows:
        for q in range(indptr[i], indptr[i + 1]):
            dense[np.uintp(indices[q])] = data[q]
        for k in range(i + 1, n_rows):
            s = 0.0
            for q in range(indptr[k], indptr[k + 1]):
                s += min(dense[np.uintp(indices[q])], data[q])
                if (q - indptr[k]) % CHUNK == CHUNK - 1 and s >= best:
                    break
            if s < best:
                best = s
        for q in range(indptr[i], indptr[i + 1]):
            dense[indices[q]] = 0.0
        if best <= 0.0:
            return 0.0
    return best


@numba.njit(cache=True, nogil=True)
def pairs_structured(indptr, indices, full, u, v, rows, best):
    """The pair search over ``S + outer(u, v)``: O(nnz_i + nnz_k) per pair of rows.

    ``full`` holds the entries at the stored positions of ``S``. Off both rows'
    patterns the pair agrees on ``min(u_i, u_k) v_j``, summed in closed form.
    """
    m = v.size
    total_v = v.sum()
    row_i, in_i, in_k = np.zeros(m), np.zeros(m, np.bool_), np.zeros(m, np.bool_)
    n_rows = indptr.size - 1
    for i in rows:
        for q in range(indptr[i], indptr[i + 1]):
            row_i[np.uintp(indices[q])] = full[q]
            in_i[np.uintp(indices[q])] = True
        for k in range(i + 1, n_rows):
            s, union_v = 0.0, 0.0
            for q in range(indptr[k], indptr[k + 1]):
                j = np.uintp(indices[q])
                in_k[j] = True
                s += min(row_i[j] if in_i[j] else u[i] * v[j], full[q])
                union_v += v[j]
            for q in range(indptr[i], indptr[i + 1]):
                j = np.uintp(indices[q])
                if not in_k[j]:
                    s += min(full[q], u[k] * v[j])
                    union_v += v[j]
            for q in range(indptr[k], indptr[k + 1]):
                in_k[np.uintp(indices[q])] = False
            s += min(u[i], u[k]) * (total_v - union_v)
            if s < best:
                best = s
        for q in range(indptr[i], indptr[i + 1]):
            row_i[np.uintp(indices[q])] = 0.0
            in_i[np.uintp(indices[q])] = False
        if best <= 0.0:
            return 0.0
    return best


@numba.njit(cache=True, nogil=True)
def _stored(indptr, indices, i, j):
    """Whether row ``i`` of a CSR pattern with sorted indices stores column ``j``."""
    lo, hi = indptr[i], indptr[i + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if indices[mid] < j:
            lo = mid + 1
        else:
            hi = mid
    return lo < indptr[i + 1] and indices[lo] == j


@numba.njit(cache=True, nogil=True)
def doeblin_structured(indptr, indices, data, u, v, order):
    """``sum_j min_i T[i, j]`` of ``T = S + outer(u, v)``, from ``S``'s CSR (sorted indices,
    no duplicates) in one pass over its rows, no transpose: each column's least stored
    entry, and ``u_i v_j`` of the first row of ``order`` (the rows by ascending ``u``) that
    stores nothing in the column, if one does. A column looks past a row only where the row
    stores it: at most nnz + n binary searches in all."""
    n, m = u.size, v.size
    lowest = np.full(m, np.inf)
    for i in range(n):
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            lowest[j] = min(lowest[j], data[q] + u[i] * v[j])
    total = 0.0
    for j in range(m):
        least = lowest[j]
        for i in order:  # most columns stop at the first row
            if not _stored(indptr, indices, i, j):  # row i is off the pattern: u_i v_j
                least = min(least, u[i] * v[j])
                break
        total += least
    return total
