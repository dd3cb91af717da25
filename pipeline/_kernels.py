"""Compiled forward recursions of the inference backends.

Each runs the whole horizon in one compiled loop, so no backend pays
per-step Python overhead and a speedup measures the method, not the
interpreter. The dense one calls BLAS (``np.dot``, a matrix-vector product)
once per step; the CSR one scatters the stored entries of the rows of states
with non-zero belief (or, for short rows and a mostly non-zero belief, all
entries in one flat loop), and adds the rank-one part of a structured matrix
``S + outer(u, v)`` in O(n). Each step reads the monotonic clock (about 30 ns)
to record the cumulative runtime. The ``_block`` variants advance B
distributions at once as a state-major (n, B) block.
"""

from __future__ import annotations

import time

import numba
import numpy as np
from numba import types

_clock_gettime = types.ExternalFunction("clock_gettime", types.int32(types.int32, types.voidptr))
_MONOTONIC = time.CLOCK_MONOTONIC


@numba.njit(cache=True, nogil=True)
def monotonic(buffer):
    """``time.monotonic()`` inside compiled code; ``buffer`` is int64 scratch of length 2."""
    _clock_gettime(_MONOTONIC, buffer.ctypes)
    return buffer[0] + 1e-9 * buffer[1]


@numba.njit(cache=True, nogil=True)
def _condition(belief, likelihood):
    """``belief <- belief * likelihood / evidence`` in place; return the evidence.

    With zero evidence the belief is left as it was (the prediction).
    """
    evidence = 0.0
    for i in range(belief.size):
        evidence += belief[i] * likelihood[i]
    if evidence > 0.0:
        for i in range(belief.size):
            belief[i] = belief[i] * likelihood[i] / evidence
    return evidence


@numba.njit(cache=True, nogil=True)
def _advance_csr(indptr, indices, data, belief, out):
    """``out = belief @ T`` for CSR ``T``: scatter each non-zero state's row.

    Column indices are read as unsigned so that numba skips its negative-index
    wraparound on every access (a quarter of the step's time at 5 entries per
    row), and four entries are loaded before they are added, since the compiler
    cannot tell that ``out`` does not alias the matrix (15% on long rows).
    """
    out[:] = 0.0
    for i in range(belief.size):
        weight = belief[i]
        if weight == 0.0:
            continue
        k, stop = indptr[i], indptr[i + 1]
        while k + 4 <= stop:
            j0, j1 = np.uintp(indices[k]), np.uintp(indices[k + 1])
            j2, j3 = np.uintp(indices[k + 2]), np.uintp(indices[k + 3])
            v0, v1 = weight * data[k], weight * data[k + 1]
            v2, v3 = weight * data[k + 2], weight * data[k + 3]
            out[j0] += v0
            out[j1] += v1
            out[j2] += v2
            out[j3] += v3
            k += 4
        while k < stop:
            out[np.uintp(indices[k])] += weight * data[k]
            k += 1


@numba.njit(cache=True, nogil=True)
def _advance_entries(entry_rows, indices, data, belief, out):
    """``out = belief @ T`` for CSR ``T`` as one flat loop over its entries.

    ``entry_rows[k]`` is the row of entry ``k``. With short rows (a few entries
    each) this beats the loop over rows, whose per-row work costs as much as
    the rows' entries (1.1 against 1.3 to 2 ns per entry at 5 entries per row).
    """
    out[:] = 0.0
    for k in range(data.size):
        out[np.uintp(indices[k])] += data[k] * belief[np.uintp(entry_rows[k])]


@numba.njit(cache=True, nogil=True)
def _mostly_non_zero(belief):
    """Whether at least half the entries of ``belief`` are non-zero."""
    count = 0
    for i in range(belief.size):
        count += belief[i] != 0.0
    return 2 * count >= belief.size


@numba.njit(cache=True, nogil=True)
def _step(t, prior, likelihoods, rows, beliefs, zero, log_evidence):
    """Condition step ``t``'s belief on its observation; return the updated log evidence."""
    if t == 0:
        beliefs[0][:] = prior
    if rows[t] >= 0:
        evidence = _condition(beliefs[t], likelihoods[rows[t]])
        if evidence > 0.0:
            return log_evidence + np.log(evidence)
        zero[t] = True
        return -np.inf
    return log_evidence


@numba.njit(cache=True, nogil=True)
def forward_dense(T, prior, likelihoods, rows, beliefs, elapsed, zero):
    """The forward recursion with a dense transition matrix ``T``, shape (n, n).

    Same arguments and outputs as ``forward_csr``.
    """
    clock = np.zeros(2, np.int64)
    start = monotonic(clock)
    log_evidence = 0.0
    for t in range(rows.size):
        if t > 0:
            np.dot(beliefs[t - 1], T, beliefs[t])
        log_evidence = _step(t, prior, likelihoods, rows, beliefs, zero, log_evidence)
        elapsed[t] = monotonic(clock) - start
    return log_evidence


@numba.njit(cache=True, nogil=True)
def forward_csr(
    indptr, indices, data, entry_rows, u, v, prior, likelihoods, rows, beliefs, elapsed, zero
):
    """The forward recursion with a CSR transition matrix ``S``, or ``S + outer(u, v)``.

    Parameters
    ----------
    indptr, indices, data : the CSR arrays of the transition matrix ``S``, shape (n, n).
    entry_rows : (nnz,) the row of each entry, or empty. Given, steps from a belief
        with at least half its entries non-zero run as one flat loop over the
        entries (faster for short rows); the others, and every step without it,
        run row by row and skip the rows of states with zero belief.
    u, v : (n,) the rank-one part of a structured matrix, or empty for plain CSR.
    prior : (n,) ``P(S_0)``.
    likelihoods : (k, n) ``P(o | S)`` for each distinct observed symbol.
    rows : (T,) int, the row of ``likelihoods`` observed at step t, or -1.
    beliefs : (T, n) output, ``P(S_t | o_0..o_t)``.
    elapsed : (T,) output, seconds from the start to the end of step t.
    zero : (T,) bool output, True where the observation had zero probability.

    Returns
    -------
    float
        The log evidence ``log P(o_0..o_{T-1})``; ``-inf`` if any step had zero evidence.
    """
    clock = np.zeros(2, np.int64)
    start = monotonic(clock)
    log_evidence = 0.0
    for t in range(rows.size):
        if t > 0:
            if entry_rows.size and _mostly_non_zero(beliefs[t - 1]):
                _advance_entries(entry_rows, indices, data, beliefs[t - 1], beliefs[t])
            else:
                _advance_csr(indptr, indices, data, beliefs[t - 1], beliefs[t])
            if u.size:
                _add_rank_one(u, v, beliefs[t - 1], beliefs[t])
        log_evidence = _step(t, prior, likelihoods, rows, beliefs, zero, log_evidence)
        elapsed[t] = monotonic(clock) - start
    return log_evidence


@numba.njit(cache=True, nogil=True)
def _advance_csr_block(indptr, indices, data, block, out):
    """``out = T^T @ block`` for CSR ``T`` and a state-major block, shape (n, B)."""
    out[:, :] = 0.0
    width = block.shape[1]
    for i in range(block.shape[0]):
        weights = block[i]
        for k in range(indptr[i], indptr[i + 1]):
            target, value = out[np.uintp(indices[k])], data[k]
            for b in range(width):
                target[b] += value * weights[b]


@numba.njit(cache=True, nogil=True)
def _step_block(t, initial, likelihoods, rows, beliefs, zero, log_evidence):
    """Condition member b of step ``t``'s block (n, B) on ``rows[b, t]``; update the evidence."""
    block = beliefs[t]
    if t == 0:
        block[:, :] = initial
    for b in range(block.shape[1]):
        if rows[b, t] < 0:
            continue
        likelihood = likelihoods[rows[b, t]]
        evidence = 0.0
        for i in range(block.shape[0]):
            evidence += block[i, b] * likelihood[i]
        if evidence > 0.0:
            for i in range(block.shape[0]):
                block[i, b] = block[i, b] * likelihood[i] / evidence
            log_evidence[b] += np.log(evidence)
        else:
            zero[b, t] = True
            log_evidence[b] = -np.inf


@numba.njit(cache=True, nogil=True)
def forward_dense_block(T, initial, likelihoods, rows, beliefs, elapsed, zero, log_evidence):
    """``forward_dense`` for B sequences at once: one matrix-matrix product per step.

    ``initial`` (n, B), ``rows`` (B, T), ``beliefs`` (T, n, B), ``zero`` (B, T) and
    ``log_evidence`` (B,) are state-major blocks; ``elapsed`` (T,) is shared.
    """
    clock = np.zeros(2, np.int64)
    start = monotonic(clock)
    for t in range(elapsed.size):
        if t > 0:
            np.dot(T.T, beliefs[t - 1], beliefs[t])
        _step_block(t, initial, likelihoods, rows, beliefs, zero, log_evidence)
        elapsed[t] = monotonic(clock) - start


@numba.njit(cache=True, nogil=True)
def forward_csr_block(
    indptr, indices, data, u, v, initial, likelihoods, rows, beliefs, elapsed, zero, log_evidence
):
    """``forward_csr`` for B sequences at once: one sparse-matrix times dense-block product.

    ``u`` and ``v`` as in ``forward_csr`` (empty for plain CSR).
    """
    clock = np.zeros(2, np.int64)
    start = monotonic(clock)
    for t in range(elapsed.size):
        if t > 0:
            _advance_csr_block(indptr, indices, data, beliefs[t - 1], beliefs[t])
            if u.size:
                weights = u @ beliefs[t - 1]
                for j in range(v.size):
                    for b in range(weights.size):
                        beliefs[t][j, b] += v[j] * weights[b]
        _step_block(t, initial, likelihoods, rows, beliefs, zero, log_evidence)
        elapsed[t] = monotonic(clock) - start


@numba.njit(cache=True, nogil=True)
def _add_rank_one(u, v, belief, out):
    """``out += (belief . u) v``: the rank-one part of ``belief @ (S + outer(u, v))``."""
    weight = 0.0
    for i in range(belief.size):
        weight += belief[i] * u[i]
    for j in range(out.size):
        out[j] += weight * v[j]
