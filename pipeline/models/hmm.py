"""The hidden Markov model container: three validated arrays, no inference.

Conventions (Section 2 of Marwitz, Möller, Bender, Gehrke, "Denoising the Future:
Top-p Distributions for Moving Through Time", written row-stochastically):

- ``prior[i] = P(S_0 = i)``, shape ``(n_states,)``;
- ``transition[i, j] = P(S_{t+1} = j | S_t = i)``, shape ``(n_states, n_states)``;
- ``emission[i, o] = P(O_t = o | S_t = i)``, shape ``(n_states, n_observations)``.

The paper prints its tables with one column per *current* state; they are the
transposes of ``transition`` here.

``HMM`` holds the three, the matrices in any format of ``pipeline.operators`` (dense,
CSR, ``SparsePlusRankOne``, ``LowRank``), checks them when made (``validate_rows``:
entries finite and non-negative, rows summing to 1 within ``ROW_SUM_TOLERANCE``), and
keeps the transitions' layout for the compiled forward recursion once it is made
(``transition_layout``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline.operators import Matrix, as_operator, check_entries, check_real, layout, row_sums

ROW_SUM_TOLERANCE = 1e-9
"""How far a probability row's sum may stray from 1."""


def validate_rows(name: str, matrix: Matrix, *, vector: bool = False) -> None:
    """Every entry finite and non-negative, every row summing to 1.

    ``vector``: ``matrix`` is one distribution as a single row (messages name no row).
    """
    check_entries(matrix, name, vector=vector)
    sums = row_sums(matrix)
    off = np.abs(sums - 1.0) > ROW_SUM_TOLERANCE
    if off.any():
        row = int(np.flatnonzero(off)[0])
        where = name if vector else f"{name} row {row}"
        raise ValueError(
            f"{where} sums to {float(sums[row]):.12g}; "
            f"it must sum to 1 within {ROW_SUM_TOLERANCE:g}"
        )


@dataclass(frozen=True, eq=False)
class HMM:
    """A hidden Markov model with transition and emission matrices in any operator format.

    Parameters
    ----------
    prior : array, shape (n_states,)
        Initial state distribution ``P(S_0)``. Always stored dense.
    transition : ndarray, csr_array, SparsePlusRankOne or LowRank, shape (n_states, n_states)
        Row-stochastic transition matrix ``P(S_{t+1} = j | S_t = i)``.
    emission : ndarray, csr_array, SparsePlusRankOne or LowRank, shape (n_states, n_observations)
        Row-stochastic emission matrix ``P(O_t = o | S_t = i)``.

    Every matrix is put in its canonical format (``pipeline.operators.as_operator``:
    float64, sparse input as CSR with sorted indices). Construction raises
    ``ValueError`` naming the offending array, row and value when shapes
    disagree, an entry is negative or not finite, or a row does not sum to 1
    within ``ROW_SUM_TOLERANCE``. How a step is computed
    (dense BLAS, sparse CSR, structured or low-rank) follows ``transition``'s format.

    >>> import numpy as np
    >>> hmm = HMM(np.array([0.5, 0.5]), np.eye(2), np.array([[0.9, 0.1], [0.2, 0.8]]))
    >>> hmm.n_states, hmm.n_observations
    (2, 2)
    """

    prior: np.ndarray
    transition: Matrix
    emission: Matrix

    def __post_init__(self) -> None:
        if sp.issparse(self.prior):
            raise TypeError("prior must be a dense 1-D array, not a sparse matrix")
        check_real(self.prior, "prior")
        prior = np.ascontiguousarray(self.prior, dtype=np.float64)
        if prior.ndim != 1 or prior.size == 0:
            raise ValueError(f"prior must be a non-empty 1-D array, got shape {prior.shape}")
        transition = as_operator(self.transition, "transition")
        emission = as_operator(self.emission, "emission")
        n = prior.size
        if transition.shape != (n, n):
            raise ValueError(
                f"transition has shape {transition.shape}; with a prior of {n} states "
                f"it must be ({n}, {n})"
            )
        if emission.shape[0] != n or emission.shape[1] == 0:
            raise ValueError(
                f"emission has shape {emission.shape}; it must be ({n}, n_observations)"
            )
        validate_rows("prior", prior[None, :], vector=True)
        validate_rows("transition", transition)
        validate_rows("emission", emission)
        object.__setattr__(self, "prior", prior)
        object.__setattr__(self, "transition", transition)
        object.__setattr__(self, "emission", emission)

    @property
    def n_states(self) -> int:
        """Number of hidden states ``n``."""
        return self.prior.size

    @property
    def n_observations(self) -> int:
        """Number of observation symbols ``m``."""
        return self.emission.shape[1]

    @functools.cached_property
    def transition_layout(self):
        """``transition`` as the compiled forward recursion reads it
        (``pipeline.operators.layout``), made on first use and kept, so repeated
        calls on one model pay for it once."""
        return layout(self.transition)
