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

from pipeline.models.hmm import HMM

PEAK_MASS = 0.9
BELL = PEAK_MASS * np.array([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
"""Binomial(4, 1/2) weights, a discrete bell, scaled to the peak mass: offsets -2..2."""
OFFSETS = np.arange(-2, 3)


def bell_rows(centres: np.ndarray, n_states: int) -> np.ndarray:
    """Dense rows whose bells sit at ``centres``.

    Parameters
    ----------
    centres : int array, shape (k,)
        The state each row's bell is centred on.
    n_states : int
        Row length ``n``.

    Returns
    -------
    ndarray, shape (k, n_states)
        ``0.1 / (n - 5)`` everywhere except ``BELL`` on ``centre - 2 .. centre + 2`` (mod n).
    """
    rows = np.full((centres.size, n_states), (1.0 - PEAK_MASS) / (n_states - BELL.size))
    columns = (centres[:, None] + OFFSETS[None, :]) % n_states
    rows[np.arange(centres.size)[:, None], columns] = BELL
    return rows


def centres(n_states: int, seed: int) -> np.ndarray:
    """Each state's bell centre for the next state, shape (n_states,), drawn from ``seed``."""
    return np.random.default_rng(seed).integers(0, n_states, size=n_states)


def check(n_states: int) -> None:
    """Raise ``ValueError`` unless ``n_states >= 6`` (five bell states and a background)."""
    if n_states < BELL.size + 1:
        raise ValueError(f"the bell family needs n_states >= 6, got {n_states}")


def build(n_states: int, seed: int = 0) -> HMM:
    """The Bell HMM with ``n_states`` states and as many observations.

    - prior: uniform;
    - transition row ``i``: the bell centred on a random state ``centres(n, seed)[i]``
      plus the uniform background (see the module docstring);
    - emission row ``i``: the same bell centred on ``i`` itself, a noisy reading
      of the state: 0.9 on observations ``i - 2 .. i + 2``, 0.1 spread over the rest.

    Needs ``n_states >= 6`` so that the background is not empty.
    """
    check(n_states)
    transition = bell_rows(centres(n_states, seed), n_states)
    emission = bell_rows(np.arange(n_states), n_states)
    return HMM(np.full(n_states, 1.0 / n_states), transition, emission)
