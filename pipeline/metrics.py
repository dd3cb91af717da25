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

from pipeline.models.structured import SparsePlusRankOne, entry_rows

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


@numba.njit(cache=True, nogil=True)
def _gamma_structured(indptr, indices, full, u, v, rows, best):
    """``_gamma_dense`` for ``S + outer(u, v)``: O(nnz_i + nnz_k) per pair of rows.

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


def mixing_rate_part(T, part: int, parts: int) -> float:
    """The least row overlap over pairs ``(i, k > i)`` with ``i % parts == part``.

    The minimum over ``part = 0..parts-1`` is gamma; parts are balanced
    (interleaved rows), so threads or Dask tasks can each take one.
    """
    rows = np.arange(part, T.shape[0] - 1, parts)
    if isinstance(T, SparsePlusRankOne):
        full = T.pattern()
        return float(
            _gamma_structured(full.indptr, full.indices, full.data, T.u, T.v, rows, np.inf)
        )
    if sp.issparse(T):
        T = sp.csr_array(T, dtype=np.float64)
        T.sum_duplicates()
        return float(_gamma_csr(T.indptr, T.indices, T.data, T.shape[1], rows, np.inf))
    return float(_gamma_dense(np.ascontiguousarray(T, dtype=np.float64), rows, np.inf))


def minimal_mixing_rate(T, *, threads: int | None = None) -> float:
    """The minimal mixing rate ``gamma = min_{i != k} sum_j min(T[i, j], T[k, j])``.

    It is the least probability mass two different rows agree on, and equals
    one minus the Dobrushin ergodicity coefficient. Exact: every pair of rows
    is considered, pruned only once it provably cannot be the minimum.

    Parameters
    ----------
    T : ndarray, scipy sparse matrix or SparsePlusRankOne, shape (n, n), n >= 2
        Row-stochastic transition matrix.
    threads : int, optional
        Threads sharing the row pairs (``mixing_rate_part``); default the CPU count.

    Returns
    -------
    float in [0, 1]
        Clipped to 1 against rounding (the uniform matrix sums to 1 + 2e-16).
    """
    n = T.shape[0]
    if T.ndim != 2 or n < 2:
        raise ValueError(f"minimal_mixing_rate needs a matrix with >= 2 rows, got shape {T.shape}")
    threads = max(1, min(threads or os.cpu_count() or 1, n - 1))
    with ThreadPoolExecutor(threads) as pool:
        gamma = min(pool.map(lambda part: mixing_rate_part(T, part, threads), range(threads)))
    return float(min(gamma, 1.0))  # rows summing to 1 + rounding can give 1 + 1e-16


@numba.njit(cache=True, nogil=True)
def _doeblin_structured(indptr, rows, full, u, v, order):
    """``sum_j min_i T[i, j]`` column by column of ``S + outer(u, v)`` (CSC pattern)."""
    n = u.size
    marked = np.zeros(n, np.bool_)
    total = 0.0
    for j in range(v.size):
        lowest = np.inf
        for q in range(indptr[j], indptr[j + 1]):
            lowest = min(lowest, full[q])
            marked[np.uintp(rows[q])] = True
        if indptr[j + 1] - indptr[j] < n:  # some row is off the pattern: u_i v_j
            for i in order:
                if not marked[i]:
                    lowest = min(lowest, u[i] * v[j])
                    break
        for q in range(indptr[j], indptr[j + 1]):
            marked[np.uintp(rows[q])] = False
        total += lowest
    return total


def doeblin_lower_bound(T) -> float:
    """``sum_j min_i T[i, j]``: the mass every row shares, a lower bound on gamma.

    Costs one pass over ``T`` (dense, sparse or structured, shape (n, n)):
    O(nnz + n) for a structured matrix, so it serves where gamma costs too much.
    """
    if isinstance(T, SparsePlusRankOne):
        columns = T.pattern().tocsc()
        columns.sort_indices()
        order = np.argsort(T.u, kind="stable")
        return float(
            _doeblin_structured(columns.indptr, columns.indices, columns.data, T.u, T.v, order)
        )
    if sp.issparse(T):
        T = sp.csr_array(T)
        return float(np.asarray(T.min(axis=0).toarray()).sum())
    return float(np.asarray(T).min(axis=0).sum())


def tv_certificate(gamma: float, prior_kept: float, row_kept, beliefs) -> np.ndarray:
    """An error bound for top-p prediction computed from the top-p run alone.

    ``e_0 = 1 - prior_kept`` and ``e_t = (1 - gamma) e_{t-1} + sum_i Q_{t-1}(i) (1 -
    row_kept[i])`` bound ``TV(P_t, Q_t)``: the error of step ``t - 1`` contracts by
    ``1 - gamma`` and each row ``i`` adds its dropped mass, weighted by how
    much belief ``Q`` puts on ``i``. Since every kept mass is at least ``p``,
    it is never looser than the recursion behind Theorem 4.3.

    Parameters
    ----------
    gamma : float
        The minimal mixing rate of the exact transitions, or a lower bound on it.
    prior_kept : float
        Mass of the exact prior kept by the top-p prior.
    row_kept : ndarray, shape (n_states,)
        Mass of each exact transition row kept by its top-p row (``topp.kept_mass``).
    beliefs : ndarray, shape (T, n_states)
        The top-p model's predictions ``Q_t``.

    Returns
    -------
    ndarray, shape (T,)
    """
    dropped = np.asarray(beliefs)[:-1] @ (1.0 - np.asarray(row_kept))
    bound = np.empty(len(beliefs))
    bound[0] = 1.0 - prior_kept
    for t in range(1, len(beliefs)):
        bound[t] = (1.0 - gamma) * bound[t - 1] + dropped[t - 1]
    return np.clip(bound, 0.0, 1.0)


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
    """The fraction of zero entries of a dense, sparse or structured matrix.

    Explicit zeros count as zero.
    """
    size = np.prod(M.shape)
    if isinstance(M, SparsePlusRankOne):
        # Non-zero: rank-one entries off the pattern, and pattern entries that are non-zero.
        rows = entry_rows(M.sparse.indptr)
        on_pattern = np.count_nonzero(M.u[rows] * M.v[M.sparse.indices])
        off_pattern = np.count_nonzero(M.u) * np.count_nonzero(M.v) - on_pattern
        return 1.0 - (off_pattern + M.pattern().count_nonzero()) / size
    if sp.issparse(M):
        return 1.0 - M.count_nonzero() / size
    return 1.0 - np.count_nonzero(M) / size
