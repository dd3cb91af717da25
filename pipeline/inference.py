"""Exact forward inference in an HMM: prediction and filtering.

Two backends behind one signature and one result type, chosen by the
representation of ``hmm.transition``:

- dense: one BLAS matrix-vector product (``belief @ T``) per step;
- sparse (CSR): touches only the stored entries of the rows of states with
  non-zero belief.

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
from pipeline.models.hmm import HMM


class FilterResult(NamedTuple):
    """The result of ``filtering``.

    beliefs : ndarray, shape (T, n_states)
        ``beliefs[t] = P(S_t | o_0..o_t)`` (the prediction ``P(S_t)`` where no
        symbol was observed up to ``t``).
    log_evidence : float
        ``log P(o_0..o_{T-1})`` over the observed steps; ``-inf`` when some
        observation had zero probability.
    zero_evidence : ndarray of int, shape (k,)
        The steps whose observation had zero probability (their belief is the prediction).
    elapsed : ndarray, shape (T,)
        Seconds from the start of the recursion to the end of step ``t``.
    """

    beliefs: np.ndarray
    log_evidence: float
    zero_evidence: np.ndarray
    elapsed: np.ndarray


def predict(hmm: HMM, horizon: int) -> np.ndarray:
    """State distributions ``P(S_t)`` for ``t = 0..horizon`` without observations.

    Returns
    -------
    ndarray, shape (horizon + 1, n_states)
        Row ``t`` is ``prior @ T^t``.
    """
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 0:
        raise ValueError(f"horizon must be an integer >= 0, got {horizon!r}")
    return filtering(hmm, np.full(int(horizon) + 1, -1)).beliefs


def filtering(hmm: HMM, observations) -> FilterResult:
    """The forward algorithm: filtered beliefs ``P(S_t | o_0..o_t)`` and the evidence.

    Parameters
    ----------
    hmm : HMM
        Dense or sparse; the backend follows ``hmm.transition``.
    observations : array_like of int, shape (T,)
        ``observations[t]`` in ``0..n_observations - 1``, or -1 for no observation.

    Returns
    -------
    FilterResult
    """
    observations = _validate_observations(observations, hmm.n_observations)
    likelihoods, rows = _likelihoods(hmm.emission, observations)
    steps, n = observations.size, hmm.n_states
    beliefs = np.empty((steps, n))
    elapsed = np.empty(steps)
    zero = np.zeros(steps, dtype=bool)
    if hmm.is_sparse:
        T = hmm.transition
        log_evidence = _kernels.forward_csr(
            T.indptr, T.indices, T.data, hmm.prior, likelihoods, rows, beliefs, elapsed, zero
        )
    else:
        log_evidence = _kernels.forward_dense(
            hmm.transition, hmm.prior, likelihoods, rows, beliefs, elapsed, zero
        )
    return FilterResult(beliefs, float(log_evidence), np.flatnonzero(zero), elapsed)


def _validate_observations(observations, n_observations: int) -> np.ndarray:
    observations = np.asarray(observations)
    if observations.ndim != 1 or observations.size == 0:
        raise ValueError(
            f"observations must be a non-empty 1-D array, got shape {observations.shape}"
        )
    if observations.dtype.kind not in "iu":
        raise ValueError(f"observations must be integers, got dtype {observations.dtype}")
    bad = (observations < -1) | (observations >= n_observations)
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"observations[{t}] = {observations[t]}; allowed: -1 (none) or 0..{n_observations - 1}"
        )
    return observations.astype(np.int64)


def _likelihoods(emission, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``P(o | S)`` for each distinct observed symbol, and each step's row into it.

    Returns
    -------
    likelihoods : ndarray, shape (k, n_states)
    rows : ndarray of int, shape (T,), -1 where nothing was observed
    """
    observed = np.unique(observations[observations >= 0])
    rows = np.where(observations >= 0, np.searchsorted(observed, observations), -1)
    columns = emission[:, observed]
    if sp.issparse(columns):
        columns = columns.toarray()
    return np.ascontiguousarray(columns.T), rows
