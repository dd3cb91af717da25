"""The backtrack of a Viterbi recursion from its table of best predecessors."""

from __future__ import annotations

import numpy as np


def backtrack(back: np.ndarray, last: int) -> np.ndarray:
    """The Viterbi path ending in state ``last``: ``back`` (T, n) holds at ``[t, j]`` the best
    state at ``t - 1`` before state ``j`` at ``t``; returns the states (T,)."""
    path = np.empty(back.shape[0], dtype=np.int64)
    path[-1] = last
    for t in range(back.shape[0] - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path
