"""The weather HMM of the top-p paper's Example 1 (Table 1)."""

from __future__ import annotations

import numpy as np

from pipeline.hmm import HMM
from pipeline.models.family import ParameterError

SEEDED = False
"""Every seed gives the same HMM."""

STATES = ("partly cloudy", "light rain", "foggy", "sunny", "heavy rain", "thunderstorm")
OBSERVATIONS = ("no raincoat", "raincoat")
RAINY = (1, 4, 5)
"""Light rain, heavy rain and thunderstorm: the states whose next-step mass is P(raincoat)."""

# Table 1 transposed: row = current state, column = next state, both in STATES order.
TRANSITION = np.array(
    [
        [0.3, 0.2, 0.1, 0.2, 0.1, 0.1],
        [0.2, 0.2, 0.1, 0.1, 0.2, 0.2],
        [0.3, 0.2, 0.2, 0.1, 0.1, 0.1],
        [0.3, 0.25, 0.15, 0.2, 0.06, 0.04],
        [0.1, 0.2, 0.1, 0.1, 0.2, 0.3],
        [0.1, 0.2, 0.1, 0.1, 0.3, 0.2],
    ]
)


def check(n_states: int) -> None:
    """Raise ``ParameterError`` unless ``n_states`` is 6."""
    if n_states != len(STATES):
        raise ParameterError(
            "n_states", f"the weather family has exactly 6 states, got n_states={n_states}"
        )


def build(n_states: int = 6, seed: int = 0) -> HMM:
    """The 6-state weather HMM of Example 1; it has no randomness and no parameters.

    States are ``STATES``; ``transition`` is Table 1 with rows = current state.
    The prior is uniform. Observations are ``OBSERVATIONS`` (0 = no raincoat,
    1 = raincoat) with ``P(raincoat | s) = T[s, light rain] + T[s, heavy rain] +
    T[s, thunderstorm]``, so 0.35 when sunny as in the paper. ``seed`` is
    accepted for a uniform family signature and ignored.
    """
    check(n_states)
    raincoat = TRANSITION[:, RAINY].sum(axis=1)
    emission = np.column_stack([1.0 - raincoat, raincoat])
    return HMM(np.full(6, 1 / 6), TRANSITION.copy(), emission)
