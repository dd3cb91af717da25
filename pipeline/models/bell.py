"""The Bell HMM of Section 5: the case that favours top-p.

Every next-state distribution puts ``PEAK_MASS = 0.9`` on five consecutive
states (cyclically) with bell-shaped weights and spreads the remaining 0.1
evenly over the other ``n - 5`` states, "having lots of unlikely successor
states" as the paper says. The paper does not say which five states a row
favours; here each row's bell is centred on a state drawn uniformly at random
(independently per row, from ``seed``), so the chain is a random sparse graph
plus a uniform background rather than a trivially symmetric ring walk.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import HMM
from pipeline.models.family import ParameterError
from pipeline.operators import Matrix, SparsePlusRankOne

PEAK_MASS = 0.9
BELL = PEAK_MASS * np.array([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
"""Binomial(4, 1/2) weights, a discrete bell, scaled to the peak mass: offsets -2..2."""
OFFSETS = np.arange(-2, 3)


def bell_rows(centres: np.ndarray, n_states: int) -> SparsePlusRankOne:
    """Rows whose bells sit at ``centres``, as peaks on a flat background.

    Parameters
    ----------
    centres : int array, shape (k,)
        The state each row's bell is centred on.
    n_states : int
        Row length ``n``.

    Returns
    -------
    SparsePlusRankOne, shape (k, n_states)
        ``0.1 / (n - 5)`` everywhere except ``BELL`` on ``centre - 2 .. centre + 2`` (mod n).
    """
    background = (1.0 - PEAK_MASS) / (n_states - BELL.size)
    columns = (centres[:, None] + OFFSETS[None, :]) % n_states
    peaks = sp.csr_array(
        (
            np.tile(BELL - background, centres.size),
            (np.repeat(np.arange(centres.size), BELL.size), columns.ravel()),
        ),
        shape=(centres.size, n_states),
    )
    return SparsePlusRankOne(peaks, np.full(centres.size, background), np.ones(n_states))


def centres(n_states: int, seed: int) -> np.ndarray:
    """Each state's bell centre for the next state, shape (n_states,), drawn from ``seed``."""
    return np.random.default_rng(seed).integers(0, n_states, size=n_states)


def check(n_states: int, *, structured: bool = False) -> None:
    """Raise ``ParameterError`` unless ``n_states >= 6`` (five bell states and a background)."""
    if n_states < BELL.size + 1:
        raise ParameterError("n_states", f"the bell family needs n_states >= 6, got {n_states}")


def build(n_states: int, seed: int = 0, *, structured: bool = False) -> HMM:
    """The Bell HMM with ``n_states`` states and as many observations.

    - prior: uniform;
    - transition row ``i``: the bell centred on a random state ``centres(n, seed)[i]``
      plus the uniform background (see the module docstring);
    - emission row ``i``: the same bell centred on ``i`` itself, a noisy reading
      of the state: 0.9 on observations ``i - 2 .. i + 2``, 0.1 spread over the rest.

    ``structured`` keeps both matrices as peaks plus a flat background
    (``SparsePlusRankOne``, O(n) memory, for 100,000s of states) instead of dense.
    Needs ``n_states >= 6`` so that the background is not empty.
    """
    check(n_states, structured=structured)
    transition: Matrix = bell_rows(centres(n_states, seed), n_states)
    emission: Matrix = bell_rows(np.arange(n_states), n_states)
    if not structured:
        transition, emission = transition.rows(0, n_states), emission.rows(0, n_states)
    return HMM(np.full(n_states, 1.0 / n_states), transition, emission)
