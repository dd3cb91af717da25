"""Exact forward inference in an HMM: prediction and filtering.

Two backends behind one signature and one result type, chosen by the
representation of ``hmm.transition``:

- dense: one BLAS matrix-vector product (``belief @ T``) per step;
- sparse (CSR): touches only the stored entries of the rows of states with
  non-zero belief (with short rows and a mostly non-zero belief, all entries in
  one flat loop, which costs less than the loop over rows);
- structured (``SparsePlusRankOne``, ``S + outer(u, v)``): the CSR step on ``S``
  plus one rank-one update, O(nnz + n) per step for an exact model whose every
  entry is non-zero.

Both run the whole horizon in one compiled loop (``pipeline._kernels``).

Conventions: ``observations[t]`` is the symbol observed at step ``t`` or -1
for none. Step 0 is the prior conditioned on ``observations[0]``; every later
step is a transition followed by conditioning. When an observation has zero
probability under the current belief (it happens in top-p models, which drop
states and symbols), the step keeps the predicted belief, the step is listed in
``zero_evidence`` and ``log_evidence`` is ``-inf``: never a crash or a NaN.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from pipeline import _kernels
from pipeline.models.hmm import HMM, validate_rows
from pipeline.models.structured import SparsePlusRankOne, entry_rows

SHORT_ROWS = 64
"""A CSR matrix with fewer entries per row on average steps from mostly non-zero
beliefs in one flat loop over its entries instead of row by row
(``pipeline._kernels.forward_csr``): measured 1.1 against 1.3 to 2 ns per entry
at 5 entries per row, even at 64, slower (1.05 against 1.0) at thousands."""


class FilterResult(NamedTuple):
    """The result of ``filtering``; B is the batch size of a batch.

    beliefs : ndarray, shape (T, n_states), or (B, T, n_states)
        ``beliefs[t] = P(S_t | o_0..o_t)`` (the prediction ``P(S_t)`` where no
        symbol was observed up to ``t``).
    log_evidence : float, or ndarray of shape (B,)
        ``log P(o_0..o_{T-1})`` over the observed steps; ``-inf`` when some
        observation had zero probability.
    zero_evidence : ndarray of int, or a tuple of B of them
        The steps whose observation had zero probability (their belief is the prediction).
    elapsed : ndarray, shape (T,)
        Seconds from the start of the recursion to the end of step ``t`` (for
        the whole batch, which advances as one block).
    """

    beliefs: np.ndarray
    log_evidence: float | np.ndarray
    zero_evidence: np.ndarray | tuple[np.ndarray, ...]
    elapsed: np.ndarray


def predict(hmm: HMM, horizon: int, *, initial=None) -> np.ndarray:
    """State distributions ``P(S_t)`` for ``t = 0..horizon`` without observations.

    Parameters
    ----------
    hmm : HMM
    horizon : int >= 0
    initial : array_like, shape (n_states,) or (B, n_states), optional
        Distributions of ``S_0``; default ``hmm.prior``. A batch advances as one
        block (a matrix-matrix product per step), not one distribution at a time.

    Returns
    -------
    ndarray, shape (horizon + 1, n_states), or (B, horizon + 1, n_states)
        Row ``t`` is ``initial @ T^t``.
    """
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 0:
        raise ValueError(f"horizon must be an integer >= 0, got {horizon!r}")
    return filtering(hmm, np.full(int(horizon) + 1, -1), initial=initial).beliefs


def filtering(hmm: HMM, observations, *, initial=None) -> FilterResult:
    """The forward algorithm: filtered beliefs ``P(S_t | o_0..o_t)`` and the evidence.

    Parameters
    ----------
    hmm : HMM
        Dense or sparse; the backend follows ``hmm.transition``.
    observations : array_like of int, shape (T,) or (B, T)
        ``observations[..., t]`` in ``0..n_observations - 1``, or -1 for no observation.
    initial : array_like, shape (n_states,) or (B, n_states), optional
        Distributions of ``S_0``; default ``hmm.prior``. A batch of observation
        sequences or initial distributions (either is broadcast against the
        other) runs as one block product per step.

    Returns
    -------
    FilterResult
    """
    observations = _validate_observations(observations, hmm.n_observations)
    initial = _validate_initial(hmm, initial)
    likelihoods, rows = _likelihoods(hmm.emission, observations)
    if observations.ndim == 1 and initial.ndim == 1:
        return _forward(hmm, initial, likelihoods, rows)
    return _forward_block(hmm, initial, likelihoods, rows)


def _forward(hmm: HMM, initial, likelihoods, rows) -> FilterResult:
    steps, n = rows.size, hmm.n_states
    beliefs = np.empty((steps, n))
    beliefs.fill(0.0)  # touch every page now, so no page fault falls inside the timed loop
    elapsed = np.empty(steps)
    zero = np.zeros(steps, dtype=bool)
    arguments = (initial, likelihoods, rows, beliefs, elapsed, zero)
    csr = _csr_parts(hmm.transition)
    if csr is None:
        log_evidence = _kernels.forward_dense(hmm.transition, *arguments)
    else:
        indptr, indices, data, u, v = csr
        flat = indices.size < SHORT_ROWS * n  # short rows: step over the entries at once
        row_of_entry = entry_rows(indptr, indices.dtype) if flat else np.empty(0, indices.dtype)
        log_evidence = _kernels.forward_csr(indptr, indices, data, row_of_entry, u, v, *arguments)
    return FilterResult(beliefs, float(log_evidence), np.flatnonzero(zero), elapsed)


def _forward_block(hmm: HMM, initial, likelihoods, rows) -> FilterResult:
    """A batch: the kernels work on state-major blocks (n, B) so a step is one product."""
    size = max(rows.shape[0] if rows.ndim == 2 else 1, initial.shape[0] if initial.ndim == 2 else 1)
    rows = np.ascontiguousarray(np.broadcast_to(np.atleast_2d(rows), (size, rows.shape[-1])))
    block = np.ascontiguousarray(np.broadcast_to(np.atleast_2d(initial), (size, hmm.n_states)).T)
    steps = rows.shape[1]
    beliefs = np.empty((steps, hmm.n_states, size))
    beliefs.fill(0.0)  # touch every page now, so no page fault falls inside the timed loop
    elapsed = np.empty(steps)
    zero = np.zeros((size, steps), dtype=bool)
    log_evidence = np.zeros(size)
    arguments = (block, likelihoods, rows, beliefs, elapsed, zero, log_evidence)
    csr = _csr_parts(hmm.transition)
    if csr is None:
        _kernels.forward_dense_block(hmm.transition, *arguments)
    else:
        _kernels.forward_csr_block(*csr, *arguments)
    return FilterResult(
        np.ascontiguousarray(beliefs.transpose(2, 0, 1)),
        log_evidence,
        tuple(np.flatnonzero(member) for member in zero),
        elapsed,
    )


def _csr_parts(T) -> tuple | None:
    """The CSR kernel's view of ``T``: the CSR arrays of ``T`` (or of its sparse part)
    and its rank-one factors (empty if none); None for a dense ``T``."""
    if isinstance(T, SparsePlusRankOne):
        S = T.sparse
        return S.indptr, S.indices, S.data, T.u, T.v
    if sp.issparse(T):
        return T.indptr, T.indices, T.data, np.empty(0), np.empty(0)
    return None


def _validate_initial(hmm: HMM, initial) -> np.ndarray:
    if initial is None:
        return hmm.prior
    initial = np.ascontiguousarray(initial, dtype=np.float64)
    if initial.ndim not in (1, 2) or initial.shape[-1] != hmm.n_states or initial.size == 0:
        raise ValueError(
            f"initial must have shape ({hmm.n_states},) or (B, {hmm.n_states}), got {initial.shape}"
        )
    validate_rows("initial", np.atleast_2d(initial), vector=initial.ndim == 1)
    return initial


def _validate_observations(observations, n_observations: int) -> np.ndarray:
    observations = np.asarray(observations)
    if observations.ndim not in (1, 2) or observations.shape[-1] == 0 or observations.size == 0:
        raise ValueError(
            f"observations must be a non-empty 1-D or 2-D array, got shape {observations.shape}"
        )
    if observations.dtype.kind not in "iu":
        raise ValueError(f"observations must be integers, got dtype {observations.dtype}")
    bad = (observations < -1) | (observations >= n_observations)
    if bad.any():
        where = ", ".join(str(int(i)) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"observations[{where}] = {observations[bad][0]}; allowed: -1 (none) or "
            f"0..{n_observations - 1}"
        )
    return observations.astype(np.int64)


def _likelihoods(emission, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(o | S)`` for each distinct observed symbol, and each step's row into it.

    Returns
    -------
    likelihoods : ndarray, shape (k, n_states)
    rows : ndarray of int, the shape of ``observations``, -1 where nothing was observed
    """
    observed = np.unique(observations[observations >= 0])
    rows = np.where(observations >= 0, np.searchsorted(observed, observations), -1)
    if observed.size == 0:  # prediction: nothing to look up
        return np.empty((0, emission.shape[0])), rows
    if isinstance(emission, SparsePlusRankOne):
        columns = emission.columns(observed)
    else:
        columns = emission[:, observed]
    if sp.issparse(columns):
        columns = columns.toarray()
    return np.ascontiguousarray(columns.T), rows
