"""``ring``: a walk on a ring of states that mostly steps forward, read through noise."""

import numpy as np

from pipeline.models import HMM, ParameterError


def check(n_states: int, *, reach: int = 3, noise: float = 0.05) -> None:
    if not 1 <= reach < n_states:
        raise ParameterError("reach", f"reach must be in [1, n_states), got {reach}")
    if not 0 < noise < 1:
        raise ParameterError("noise", f"noise must be in (0, 1), got {noise}")


def build(n_states: int, seed: int = 0, *, reach: int = 3, noise: float = 0.05) -> HMM:
    """Row i puts 1 - noise on i + 1 .. i + reach (random weights from ``seed``) and spreads
    ``noise`` over every state; each state emits itself with 1 - noise."""
    check(n_states, reach=reach, noise=noise)
    rng = np.random.default_rng(seed)
    steps = rng.dirichlet(np.ones(reach), size=n_states) * (1 - noise)
    T = np.full((n_states, n_states), noise / n_states)
    rows = np.repeat(np.arange(n_states), reach)
    T[rows, (rows + np.tile(np.arange(1, reach + 1), n_states)) % n_states] += steps.ravel()
    E = np.full((n_states, n_states), noise / (n_states - 1))
    np.fill_diagonal(E, 1 - noise)
    return HMM(np.full(n_states, 1 / n_states), T, E)
