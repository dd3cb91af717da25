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
entries finite and non-negative, rows summing to 1 within ``row_sum_tolerance`` of the
precision they were given in), and keeps the transitions' layout for the compiled forward
recursion once it is made (``transition_layout``).

Arrays given in a precision below float64 (float32, float16) are cast to float64 and each
row divided by its sum (``normalised_rows``): a row normalised in float32 sums to 1 only
within float32's rounding, and every recursion and bound downstream assumes rows that sum
to 1 in float64 (a prediction would otherwise gain or lose that rounding at every step).
The model is then the float64 model of those rows, and inference on it gives exactly the
answers of that float64 model.

Why here, below ``pipeline.models``: the container is what ``pipeline.inference``,
``pipeline.methods``, ``pipeline.learning`` and ``pipeline.coupled`` take, and the families
(``pipeline.models``) are one of the places that make it. A package ``__init__`` runs before
any of its modules, so a container inside ``pipeline.models`` loads every family, the HMM
LMs' training code (``pipeline.hmmlm``) and the corpus readers (``pipeline.corpus``) for a
caller that only builds an ``HMM`` and runs inference on it; making the families lazy would
keep them out of that import but still put the lowest type inside the package above it.
This module needs only ``pipeline.operators``; ``pipeline.models`` re-exports ``HMM``, so
``from pipeline.models import HMM, build_model`` keeps working.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline.operators import Matrix, as_operator, check_entries, check_real, layout, row_sums
from pipeline.shapes import Vector

ROW_SUM_TOLERANCE = 1e-9
"""How far a probability row given in float64 (or integers) may sum from 1."""


def precision(values) -> np.dtype:
    """The floating-point type ``values`` were given in: their dtype when it is a float,
    else float64 (integers, Python floats, and the structured formats, which hold float64)."""
    dtype = np.dtype(getattr(values, "dtype", np.float64))
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _low(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a float less precise than float64."""
    return np.finfo(dtype).eps > np.finfo(np.float64).eps


def row_sum_tolerance(dtype: np.dtype, length: int) -> float:
    """How far a probability row of ``length`` entries given as ``dtype`` may sum from 1:
    ``ROW_SUM_TOLERANCE``, or ``eps(dtype) * sqrt(length)`` where that is larger.

    Rounding each entry of a row to ``dtype`` moves the row's sum by at most ``eps / 2``
    (each entry by at most ``eps / 2`` of itself); a row normalised in ``dtype`` is also off
    by the rounding of the sum it was divided by: within ``(1 + log2(length)) eps / 2`` for
    numpy's pairwise summation, about ``sqrt(length) eps / 2`` for a sequential sum of
    independent roundings. ``eps * sqrt(length)`` bounds both (``2 sqrt(m) >= 1 + log2(m)``
    for every ``m >= 1``), and stays far below any row that is wrong rather than rounded:
    float32 rows of a million entries may be off by 1.2e-4, float16 rows of 100 by 0.01.
    Float64 stays at ``ROW_SUM_TOLERANCE`` below ``2e13`` entries.
    """
    return max(ROW_SUM_TOLERANCE, float(np.finfo(dtype).eps) * math.sqrt(length))


def validate_rows(name: str, matrix: Matrix, *, vector: bool = False, dtype=np.float64) -> None:
    """Every entry finite and non-negative, every row summing to 1 within
    ``row_sum_tolerance`` of ``dtype``, the precision the rows were given in.

    ``vector``: ``matrix`` is one distribution as a single row (messages name no row).
    """
    check_entries(matrix, name, vector=vector)
    dtype = np.dtype(dtype)
    sums = row_sums(matrix)
    tolerance = row_sum_tolerance(dtype, matrix.shape[1])
    off = np.abs(sums - 1.0) > tolerance
    if off.any():
        row = int(np.flatnonzero(off)[0])
        where = name if vector else f"{name} row {row}"
        allowed = (
            f"{matrix.shape[1]} {dtype} entries must sum to 1 within {tolerance:.3g} "
            f"({dtype}'s eps times the square root of {matrix.shape[1]})"
            if _low(dtype)
            else f"it must sum to 1 within {tolerance:g}"
        )
        raise ValueError(f"{where} sums to {float(sums[row]):.12g}; {allowed}")


def normalised_rows(name: str, matrix: Matrix, dtype: np.dtype, *, vector: bool = False) -> Matrix:
    """``matrix`` (canonical: float64 dense or CSR, or a structured format) once
    ``validate_rows`` passed it at ``dtype``, the precision it was given in; given below
    float64, each row divided by its float64 sum, so it sums to 1 in float64 too."""
    validate_rows(name, matrix, vector=vector, dtype=dtype)
    if not _low(dtype):
        return matrix
    sums = row_sums(matrix)
    if isinstance(matrix, np.ndarray):
        return matrix / sums[:, None]
    divided = matrix.copy()  # CSR: the structured formats hold float64 whatever they got
    divided.data /= np.repeat(sums, np.diff(divided.indptr))
    return divided


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
    float64, sparse input as CSR with sorted indices); arrays given in float32 or float16
    are then divided by their rows' sums (``normalised_rows``). Construction raises
    ``ValueError`` naming the offending array, row and value when shapes
    disagree, an entry is negative or not finite, or a row does not sum to 1
    within ``row_sum_tolerance`` of its dtype (``ROW_SUM_TOLERANCE`` for float64). How a
    step is computed (dense BLAS, sparse CSR, structured or low-rank) follows
    ``transition``'s format.

    >>> import numpy as np
    >>> hmm = HMM(np.array([0.5, 0.5]), np.eye(2), np.array([[0.9, 0.1], [0.2, 0.8]]))
    >>> hmm.n_states, hmm.n_observations
    (2, 2)
    """

    prior: Vector
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
        prior = normalised_rows("prior", prior[None, :], precision(self.prior), vector=True)[0]
        transition = normalised_rows("transition", transition, precision(self.transition))
        emission = normalised_rows("emission", emission, precision(self.emission))
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
