"""The sweep's sampler of state paths and observations, kept as it is for its draws.

Its draws (``rng.choice`` over each dense row, one row at a time) are the observations of
the sweep's committed experiments: another sampler would change every stored ``filter``
cell. Everything else samples with ``pipeline.inference.sample``, which draws from stored
entries and factors, for batches of sequences; this module goes when the sweep moves to
it and its experiments are re-run.
"""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.limits import check_memory
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

    ``ValueError`` names ``steps`` when the two arrays cannot fit this machine's memory.
    """
    check_memory(16 * steps, f"steps={steps:,}", "16 bytes a step: the states and the symbols")
    states = np.empty(steps, np.int64)
    observations = np.empty(steps, np.int64)
    state = int(rng.choice(hmm.n_states, p=hmm.prior / hmm.prior.sum()))
    for t in range(steps):
        if t > 0:
            state = _draw(rng, hmm.transition, state)
        states[t] = state
        observations[t] = _draw(rng, hmm.emission, state)
    return states, observations
