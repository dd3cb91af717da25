"""Random peaked HMMs that scale: a few random successors on a flat background.

Each row of the transition and emission matrices puts ``1 - background`` of its
mass on ``support`` states drawn at random (with replacement: a state drawn
twice gets both weights), with weights from a symmetric Dirichlet(``alpha``),
and spreads ``background`` evenly over every state. Like the Dirichlet family,
but with O(support) random numbers per row and, with ``structured``, O(n)
memory: the family for models of 100,000s of states.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.hmm import HMM
from pipeline.models.family import ParameterError
from pipeline.operators import Matrix, SparsePlusRankOne

PRIOR, TRANSITION, EMISSION = 0, 1, 2
"""Stream ids that keep the prior, transition and emission draws independent."""


def peaked_rows(
    rng: np.random.Generator,
    n_rows: int,
    width: int,
    support: int,
    alpha: float,
    background: float,
) -> SparsePlusRankOne:
    """``n_rows`` peaked rows of length ``width`` (see the module docstring)."""
    columns = rng.integers(0, width, size=(n_rows, support))
    weights = rng.dirichlet(np.full(support, alpha), size=n_rows) * (1.0 - background)
    peaks = sp.csr_array(
        (weights.ravel(), (np.repeat(np.arange(n_rows), support), columns.ravel())),
        shape=(n_rows, width),
    )
    return SparsePlusRankOne(peaks, np.full(n_rows, background / width), np.ones(width))


def check(
    n_states: int,
    *,
    support: int = 16,
    alpha: float = 0.5,
    background: float = 0.01,
    structured: bool = False,
) -> None:
    """Raise ``ParameterError`` unless 1 <= support <= n_states, alpha > 0 and
    0 <= background < 1."""
    if not 1 <= support <= n_states:
        raise ParameterError(
            "support", f"the peaked family needs 1 <= support <= n_states, got {support}"
        )
    if not alpha > 0:
        raise ParameterError("alpha", f"the peaked family needs alpha > 0, got alpha={alpha}")
    if not 0 <= background < 1:
        raise ParameterError(
            "background", f"the peaked family needs 0 <= background < 1, got {background}"
        )


def build(
    n_states: int,
    seed: int = 0,
    *,
    support: int = 16,
    alpha: float = 0.5,
    background: float = 0.01,
    structured: bool = False,
) -> HMM:
    """A random peaked HMM with ``n_states`` states and as many observations.

    Parameters
    ----------
    support : int
        Random states per row that share ``1 - background`` of the mass.
    alpha : float
        Dirichlet concentration of their weights (small: one or two dominate).
    background : float in [0, 1)
        Mass spread evenly over all states.
    structured : bool
        Keep the matrices as ``SparsePlusRankOne`` instead of dense.

    The prior is a peaked row too.
    """
    check(n_states, support=support, alpha=alpha, background=background)
    shape = (n_states, support, alpha, background)
    prior = peaked_rows(np.random.default_rng([seed, PRIOR]), 1, *shape).rows(0, 1)[0]
    transition: Matrix = peaked_rows(np.random.default_rng([seed, TRANSITION]), n_states, *shape)
    emission: Matrix = peaked_rows(np.random.default_rng([seed, EMISSION]), n_states, *shape)
    if not structured:
        transition, emission = transition.rows(0, n_states), emission.rows(0, n_states)
    return HMM(prior, transition, emission)
