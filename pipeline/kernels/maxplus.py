"""The max-product step of Viterbi over a block of log transition rows, and the backtrack."""

from __future__ import annotations

import numba
import numpy as np


def backtrack(back: np.ndarray, last: int) -> np.ndarray:
    """The Viterbi path ending in state ``last``: ``back`` (T, n) holds at ``[t, j]`` the best
    state at ``t - 1`` before state ``j`` at ``t``; returns the states (T,)."""
    path = np.empty(back.shape[0], dtype=np.int64)
    path[-1] = last
    for t in range(back.shape[0] - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


@numba.njit(cache=True, nogil=True)
def max_step(delta, log_rows, offset, best, arg):
    """For rows ``offset .. offset + len(log_rows)`` of a log matrix, update ``best[j] =
    max_i delta[i] + log_rows[i - offset, j]`` and its argmax ``arg[j]`` in place (the first
    maximising row wins, as ``argmax`` does)."""
    for r in range(log_rows.shape[0]):
        d = delta[offset + r]
        if d == -np.inf:  # the row cannot be the maximum
            continue
        for j in range(log_rows.shape[1]):
            v = d + log_rows[r, j]
            if v > best[j]:
                best[j] = v
                arg[j] = offset + r
