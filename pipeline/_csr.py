"""Compiled kernels of the sparse (CSR) inference backend.

The whole horizon runs in one compiled loop, so small models pay no
per-step Python overhead; each step reads the monotonic clock (about 30 ns)
so that the cumulative runtime per step is recorded as the dense backend does.
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
def _advance(indptr, indices, data, belief, out):
    """``out = belief @ T`` for CSR ``T``: scatter each non-zero state's row."""
    out[:] = 0.0
    for i in range(belief.size):
        weight = belief[i]
        if weight != 0.0:
            for k in range(indptr[i], indptr[i + 1]):
                out[indices[k]] += weight * data[k]


@numba.njit(cache=True, nogil=True)
def forward(indptr, indices, data, prior, likelihoods, rows, beliefs, elapsed, zero):
    """The forward recursion with a CSR transition matrix.

    Parameters
    ----------
    indptr, indices, data : the CSR arrays of the transition matrix, shape (n, n).
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
        belief = beliefs[t]
        if t == 0:
            belief[:] = prior
        else:
            _advance(indptr, indices, data, beliefs[t - 1], belief)
        if rows[t] >= 0:
            likelihood = likelihoods[rows[t]]
            evidence = 0.0
            for i in range(belief.size):
                evidence += belief[i] * likelihood[i]
            if evidence > 0.0:
                for i in range(belief.size):
                    belief[i] = belief[i] * likelihood[i] / evidence
                log_evidence += np.log(evidence)
            else:
                zero[t] = True
                log_evidence = -np.inf
        elapsed[t] = monotonic(clock) - start
    return log_evidence
