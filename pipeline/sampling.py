"""Sampling state paths and observations from an HMM."""

from __future__ import annotations

import numpy as np

from pipeline.models.hmm import HMM
from pipeline.operators import rows


def _draw(rng: np.random.Generator, matrix, row: int) -> int:
    """One draw from row ``row`` of a row-stochastic matrix in any format."""
    weights = rows(matrix, row, row + 1)[0]
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
