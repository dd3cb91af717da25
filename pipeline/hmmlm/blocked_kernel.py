"""The kernel parameterisation on a blocked model: its low-rank blocks ``T = L R^T + S`` and
the gradient of the log evidence in them.

``kernel_blocks`` builds ``L = diag(1/z) phi(U)`` and ``R = phi(V)`` (n, F) at scales that
keep float32 in range (``_exp_balanced``) and the band's correction ``S``. ``gradient``
contracts the statistics of ``pipeline.hmmlm.blocked``: the per-transition vectors are
summed by cluster as k x F products, ``dL_a = sum alpha_{t-1}^T q_t`` and ``dR_b = sum
g_t^T y_t``, then through the normaliser and the feature map as in the unblocked kernel
(``pipeline.hmmlm.parameters``). A batch costs O(n F d) for the features and their
gradient whatever its tokens, and O(k F) per token.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from pipeline.hmmlm import blocked
from pipeline.hmmlm.parameters import Kernel, half_square
from pipeline.hmmlm.workspace import Workspace, scratch
from pipeline.operators.csr import entry_rows


class KernelBlocks(NamedTuple):
    """A kernel's low-rank blocks and what its gradient reuses."""

    T: blocked.LowRankBlocks  # L = diag(1/z) phi(U), R = phi(V), over scales (_exp_balanced)
    z: np.ndarray  # (n,) row normalisers at those shifts
    columns: np.ndarray  # (F,) the column sums of R
    band: np.ndarray  # (nnz,) T at the band's entries


def kernel_blocks(t: Kernel, indptr, indices, work: Workspace | None = None) -> KernelBlocks:
    """``T = L R^T + S`` of a (sub-model's) kernel, ``t.band`` the logits of the band's
    entries (nnz,) in the CSR order of ``indptr`` (n + 1,) and ``indices`` (nnz,)."""
    shape = (len(t.U), len(t.W))
    L = np.matmul(t.U, t.W.T, out=scratch(work, "L", shape, t.U.dtype))
    R = np.matmul(t.V, t.W.T, out=scratch(work, "R", shape, t.V.dtype))
    shift = _exp_balanced(L, R, half_square(t.U), half_square(t.V)).astype(L.dtype)
    columns = R.sum(axis=0)
    z = _row_dots(L, columns)
    rows = entry_rows(indptr)
    raw = np.exp(t.band - shift[rows])
    product = np.einsum("kf,kf->k", L[rows], R[indices])
    if rows.size:
        z += np.bincount(rows, weights=raw - product, minlength=len(L)).astype(z.dtype)
    _divide_rows(L, z)
    T = blocked.LowRankBlocks(L, R, indptr, indices, (raw - product) / z[rows])
    return KernelBlocks(T, z, columns, raw / z[rows])


ROWS = 256
"""Rows of an (n, F) array that one thread's pass takes at a time."""


@numba.njit(cache=True, nogil=True, parallel=True)
def _column_maxima(R, half_v, partial):
    """``R[j, f] -= half_v[j]`` in place and ``partial[p, f]`` the largest ``R[j, f]`` (after)
    over the rows of tile p (``ROWS`` rows), in one pass, the tiles across the threads; the
    largest over the tiles is exact in any order, so it does not depend on the threads."""
    n, F = R.shape
    for p in numba.prange(partial.shape[0]):
        partial[p] = R[p * ROWS] - half_v[p * ROWS]
        for j in range(p * ROWS, min(n, (p + 1) * ROWS)):
            for f in range(F):
                x = R[j, f] - half_v[j]
                R[j, f] = x
                if x > partial[p, f]:
                    partial[p, f] = x


@numba.njit(cache=True, nogil=True, parallel=True)
def _below(R, top):
    """``R[j, f] -= top[f]`` in place, the rows across the threads."""
    for j in numba.prange(R.shape[0]):
        for f in range(R.shape[1]):
            R[j, f] -= top[f]


@numba.njit(cache=True, nogil=True, parallel=True)
def _row_shift(L, half_u, top, shift):
    """``L[i, f] = L[i, f] - half_u[i] + top[f]``, then less ``shift[i]``, its row's largest
    entry, in place, in one pass (a row stays in cache between its two loops), the rows
    across the threads."""
    for i in numba.prange(L.shape[0]):
        high = L[i, 0] - half_u[i] + top[0]
        for f in range(L.shape[1]):
            x = L[i, f] - half_u[i] + top[f]
            L[i, f] = x
            if x > high:
                high = x
        for f in range(L.shape[1]):
            L[i, f] -= high
        shift[i] = high


@numba.njit(cache=True, nogil=True, parallel=True)
def _row_dots(L, c):
    """``L @ c`` (m,), each row's dot product summed in float64 by one thread, the rows
    across the threads."""
    out = np.empty(L.shape[0], L.dtype)
    for i in numba.prange(L.shape[0]):
        total = 0.0
        for f in range(L.shape[1]):
            total += L[i, f] * c[f]
        out[i] = total
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def _divide_rows(L, z):
    """``L[i] /= z[i]`` in place, the rows across the threads."""
    for i in numba.prange(L.shape[0]):
        for f in range(L.shape[1]):
            L[i, f] /= z[i]


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    """This process's pool of ``threads`` threads for ``_exp``, made once."""
    return ThreadPoolExecutor(threads, thread_name_prefix="exp")


def _exp(x: np.ndarray) -> None:
    """``np.exp(x, out=x)`` (numpy's vectorised exponential; numba's is scalar), its rows in
    ``numba.get_num_threads()`` slices on as many threads (numpy releases the GIL): the same
    bits on any number of threads."""
    threads = min(numba.get_num_threads(), len(x))
    if threads <= 1:
        np.exp(x, out=x)
        return
    parts = np.array_split(x, threads)
    for _ in _pool(threads).map(lambda part: np.exp(part, out=part), parts):
        pass


def _exp_balanced(L, R, half_u, half_v):
    """The kernel's features from their logits, in place, at scales that keep float32 in range.

    ``R[j, f] = exp(b_jf - m_f)`` with ``b_jf = R[j, f] - half_v[j]`` (log phi(v_j)_f) and
    ``m_f`` the largest ``b_jf`` of feature f, so every column of ``R`` peaks at 1 (its sum
    is at least 1); ``L[i, f] = exp(a_if + m_f - s_i)`` with ``a_if = L[i, f] - half_u[i]``
    and ``s_i`` the row's largest ``a_if + m_f``, so every row of ``L`` peaks at 1. Then
    ``L R^T = diag(exp(-s)) phi(U) phi(V)^T``: the kernel over one scale per row, which the
    row normalisers ``z_i >= 1`` cancel. (With one overall scale for ``R``, ``1 / z`` grows
    past float32's range as training spreads the features' scales.) Returns ``s`` (m,).
    Three compiled passes and numpy's vectorised exponential (``_exp``) over each array, in
    the arrays' precision.
    """
    partial = np.empty(((len(R) + ROWS - 1) // ROWS, R.shape[1]), R.dtype)
    _column_maxima(R, half_v.astype(R.dtype), partial)
    top = partial.max(axis=0)
    _below(R, top)
    _exp(R)
    shift = np.empty(L.shape[0], L.dtype)
    _row_shift(L, half_u.astype(L.dtype), top, shift)
    _exp(L)
    return shift


@numba.njit(cache=True, nogil=True, fastmath=True, parallel=True)
def _contract(D, M, a, c):
    """``D[i, f] = (D[i, f] - a[i] c[f]) M[i, f]`` in place; returns the row sums of D (n,).
    The rows across the threads, each row's sum by one."""
    n, F = D.shape
    sums = np.empty(n)
    for i in numba.prange(n):
        total = 0.0
        for f in range(F):
            value = (D[i, f] - a[i] * c[f]) * M[i, f]
            D[i, f] = value
            total += value
        sums[i] = total
    return sums


@numba.njit(cache=True, nogil=True, fastmath=True, parallel=True)
def _outer_sums(order, bounds, vectors, sorted_features, k, out):
    """``out[c k:(c + 1) k] = sum over i in bounds[c]:bounds[c + 1] of outer(vectors[order[i]],
    sorted_features[i])``, the clusters across the threads, each cluster's sum in order."""
    F = out.shape[1]
    for c in numba.prange(len(bounds) - 1):
        block = out[c * k : (c + 1) * k]
        block[:] = 0
        for i in range(bounds[c], bounds[c + 1]):
            r = order[i]
            for j in range(k):
                v = vectors[r, j]
                for f in range(F):
                    block[j, f] += v * sorted_features[i, f]
    return out


def _by_cluster(cluster, vectors, sorted_features, k: int, out: np.ndarray) -> np.ndarray:
    """``out[c k:(c + 1) k] = sum over rows r of cluster c of outer(vectors_r, features_r)``
    (``out`` (n, F)), for ``vectors`` (N, k) in the order of ``cluster`` (N,) and their
    ``features`` (N, F) already sorted by cluster (stably)."""
    order = np.argsort(cluster, kind="stable")
    bounds = np.searchsorted(cluster[order], np.arange(len(out) // k + 1))
    return _outer_sums(order, bounds, vectors, sorted_features, k, out)


def gradient(t: Kernel, parts: KernelBlocks, s: blocked.Statistics, k: int, work=None) -> Kernel:
    """The gradient of the batch's log evidence (``s``) with respect to the (sub-model's)
    kernel ``t`` of ``k`` states per cluster, its blocks ``parts``."""
    f, n = s.transitions, len(t.U)
    L, R = parts.T.L, parts.T.R
    indptr, indices = parts.T.indptr, parts.T.indices
    dtype = L.dtype
    h = s.visits.astype(dtype)
    # sum_j G_ij R_j and sum_i G_ij L_i, the band's entries included
    dX = _by_cluster(f.source, f.before, f.q, k, scratch(work, "dX", L.shape, dtype))
    dY = _by_cluster(f.target, f.after, f.y, k, scratch(work, "dY", L.shape, dtype))
    band = blocked.band_gradient(f, parts.T)
    if indices.size:  # the band's entries are not the product's: take them out again
        G = sp.csr_array((band, indices, indptr), shape=(n, n))
        ones = sp.csr_array((np.ones(indices.size), indices, indptr), shape=(n, n))
        dX += (h[:, None] * (ones @ R) - G @ R).astype(dtype)
        dY += (ones.T @ (h[:, None] * L) - G.T @ L).astype(dtype)
    # dX = (dL - h sum_j R_j) / z * phi(U) = (...) * L; dY = (dR - sum_i h_i L_i) * phi(V)
    row_x = _contract(dX, L, h, parts.columns)
    row_y = _contract(dY, R, np.ones(n, dtype), h @ L)
    rows = entry_rows(indptr)
    return Kernel(
        dX @ t.W - row_x.astype(dtype)[:, None] * t.U,
        dY @ t.W - row_y.astype(dtype)[:, None] * t.V,
        dX.T @ t.U + dY.T @ t.V,
        (parts.band * (band - h[rows])).astype(dtype),
    )
