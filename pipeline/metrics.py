"""Error metrics and bounds of the top-p paper (Section 4), as pure array functions.

- ``total_variation``: Definition 5;
- ``minimal_mixing_rate``: gamma of Definition 6 (Boyen and Koller), exactly;
- ``doeblin_lower_bound``: a cheap lower bound on gamma;
- ``tv_bounds``: Theorem 4.1, Corollary 1, Theorem 4.3 and the recursion behind it;
- ``sparsity``: the fraction of zero entries.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import scipy.sparse as sp

_CHUNK = 256
"""Columns summed between two pruning checks in the gamma kernels."""


def total_variation(P, Q) -> np.ndarray:
    """Total variation distance ``0.5 * sum_x |P(x) - Q(x)|`` along the last axis.

    ``P`` and ``Q`` are arrays of distributions whose shapes broadcast, e.g.
    ``(horizon + 1, n_states)`` each; the result drops the last axis.
    """
    return 0.5 * np.abs(np.asarray(P, dtype=np.float64) - np.asarray(Q, dtype=np.float64)).sum(-1)


@numba.njit(cache=True, nogil=True, fastmath=True)
def _chunk_overlap(a, b):
    s = 0.0
    for j in range(a.size):
        s += min(a[j], b[j])
    return s


@numba.njit(cache=True, nogil=True)
def _gamma_dense(T, rows, best):
    """min over i in ``rows``, k > i of sum_j min(T[i, j], T[k, j]), or ``best`` if lower.

    A pair is abandoned as soon as its partial sum reaches ``best``: the sum
    only grows, so the pair cannot be the minimum and the result stays exact.
    """
    n = T.shape[1]
    for i in rows:
        for k in range(i + 1, T.shape[0]):
            s = 0.0
            for j in range(0, n, _CHUNK):
                s += _chunk_overlap(T[i, j : j + _CHUNK], T[k, j : j + _CHUNK])
                if s >= best:
                    break
            if s < best:
                best = s
                if best <= 0.0:
                    return 0.0
    return best


@numba.njit(cache=True, nogil=True)
def _gamma_csr(indptr, indices, data, n, rows, best):
    """``_gamma_dense`` for a CSR matrix: row ``i`` scattered into a dense buffer."""
    dense = np.zeros(n)
    n_rows = indptr.size - 1
    for i in rows:
        for q in range(indptr[i], indptr[i + 1]):
            dense[np.uintp(indices[q])] = data[q]
        for k in range(i + 1, n_rows):
            s = 0.0
            for q in range(indptr[k], indptr[k + 1]):
                s += min(dense[np.uintp(indices[q])], data[q])
                if (q - indptr[k]) % _CHUNK == _CHUNK - 1 and s >= best:
                    break
            if s < best:
                best = s
        for q in range(indptr[i], indptr[i + 1]):
            dense[indices[q]] = 0.0
        if best <= 0.0:
            return 0.0
    return best


def minimal_mixing_rate(T, *, threads: int | None = None) -> float:
    """The minimal mixing rate ``gamma = min_{i != k} sum_j min(T[i, j], T[k, j])``.

    It is the least probability mass two different rows agree on, and equals
    one minus the Dobrushin ergodicity coefficient. Exact: every pair of rows
    is considered, pruned only once it provably cannot be the minimum.

    Parameters
    ----------
    T : ndarray or scipy sparse matrix, shape (n, n), n >= 2
        Row-stochastic transition matrix.
    threads : int, optional
        Threads sharing the row pairs (interleaved rows); default the CPU count.

    Returns
    -------
    float in [0, 1]
        Clipped to 1 against rounding (the uniform matrix sums to 1 + 2e-16).
    """
    n = T.shape[0]
    if T.ndim != 2 or n < 2:
        raise ValueError(f"minimal_mixing_rate needs a matrix with >= 2 rows, got shape {T.shape}")
    if sp.issparse(T):
        T = sp.csr_array(T, dtype=np.float64)
        T.sum_duplicates()

        def part(rows):
            return _gamma_csr(T.indptr, T.indices, T.data, T.shape[1], rows, np.inf)
    else:
        T = np.ascontiguousarray(T, dtype=np.float64)

        def part(rows):
            return _gamma_dense(T, rows, np.inf)

    threads = max(1, min(threads or os.cpu_count() or 1, n - 1))
    row_sets = [np.arange(r, n - 1, threads) for r in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        gamma = min(pool.map(part, row_sets))
    return float(min(gamma, 1.0))  # rows summing to 1 + rounding can give 1 + 1e-16


def doeblin_lower_bound(T) -> float:
    """``sum_j min_i T[i, j]``: the mass every row shares, a lower bound on gamma.

    Costs one pass over ``T`` (dense or sparse, shape (n, n)); zero as soon as
    no column is non-zero in every row.
    """
    if sp.issparse(T):
        T = sp.csr_array(T)
        return float(np.asarray(T.min(axis=0).toarray()).sum())
    return float(np.asarray(T).min(axis=0).sum())


def tv_bounds(p, gamma, t) -> dict[str, np.ndarray]:
    """Upper bounds on ``TV(P_t, Q_t)`` between an HMM and its top-p HMM, for prediction.

    Parameters
    ----------
    p : float in (0, 1]
        The top-p mass.
    gamma : float in [0, 1]
        The minimal mixing rate of the original transition matrix.
    t : int or array_like of int
        Time steps (0 is the prior).

    Returns
    -------
    dict of ndarray, each of ``t``'s shape
        ``single_step`` (Theorem 4.1): ``1 - p``;
        ``linear`` (Corollary 1): ``(t + 1)(1 - p)``;
        ``mixing`` (Theorem 4.3): ``(1 - p) / gamma``, ``inf`` when gamma = 0;
        ``recursive``: ``(1 - p) sum_{i=0..t} (1 - gamma)^i``, the recursion
        ``e_t = (1 - gamma) e_{t-1} + (1 - p)`` behind Theorem 4.3; never
        looser than ``linear`` or ``mixing``.
    """
    t = np.asarray(t)
    if not np.issubdtype(t.dtype, np.integer) or (t < 0).any():
        raise ValueError("t must hold non-negative integer time steps")
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    loss = 1.0 - p
    steps = (t + 1).astype(np.float64)
    linear = steps * loss
    if gamma > 0:
        mixing = np.full(t.shape, loss / gamma)
        # sum_{i=0..t} (1 - gamma)^i = (1 - (1 - gamma)^(t+1)) / gamma, without cancellation
        geometric = -np.expm1(steps * np.log1p(-gamma)) / gamma if gamma < 1 else np.ones(t.shape)
        recursive = np.minimum(loss * geometric, np.minimum(linear, mixing))
    else:
        mixing = np.full(t.shape, np.inf)
        recursive = linear.copy()
    return {
        "single_step": np.full(t.shape, loss),
        "linear": linear,
        "mixing": mixing,
        "recursive": recursive,
    }


def sparsity(M) -> float:
    """The fraction of zero entries of a dense or sparse matrix (explicit zeros count as zero)."""
    size = np.prod(M.shape)
    if sp.issparse(M):
        return 1.0 - M.count_nonzero() / size
    return 1.0 - np.count_nonzero(M) / size
