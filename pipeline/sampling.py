"""Sampling state paths and observations from an HMM."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.models.hmm import HMM
from pipeline.models.structured import SparsePlusRankOne


def _draw(rng: np.random.Generator, matrix, row: int) -> int:
    """One draw from row ``row`` of a dense, CSR or structured row-stochastic matrix."""
    if isinstance(matrix, SparsePlusRankOne):
        weights = matrix.rows(row, row + 1)[0]
        return int(rng.choice(weights.size, p=weights / weights.sum()))
    if sp.issparse(matrix):
        start, stop = matrix.indptr[row], matrix.indptr[row + 1]
        weights = matrix.data[start:stop]
        return int(matrix.indices[start + rng.choice(weights.size, p=weights / weights.sum())])
    weights = matrix[row]
    return int(rng.choice(weights.size, p=weights / weights.sum()))


def sample(hmm: HMM, steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A state path and its observations, ``steps`` long, drawn from ``hmm``.

    Returns
    -------
    states, observations : int ndarrays, shape (steps,)
        ``states[0] ~ prior``, ``states[t] ~ T[states[t - 1]]``, ``observations[t] ~ E[states[t]]``.
    """
    states = np.empty(steps, np.int64)
    observations = np.empty(steps, np.int64)
    state = int(rng.choice(hmm.n_states, p=hmm.prior / hmm.prior.sum()))
    for t in range(steps):
        if t > 0:
            state = _draw(rng, hmm.transition, state)
        states[t] = state
        observations[t] = _draw(rng, hmm.emission, state)
    return states, observations
